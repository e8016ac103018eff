import { moveAwayCommand } from '../src/core/state-files.js';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { appendFile, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ledgerChain, type ChargeEntry, type ChargeTotals } from '../src/core/charges.js';
import { StateFileError } from '../src/core/errors.js';
import { Emulator } from '../src/server/emulator.js';
import { emptyState } from '../src/core/state.js';
import { FilePersistence } from '../src/store/file-persistence.js';
import { stateChunks } from '../src/store/state-text.js';
import { droppedLinesNotice, ledgerMatches, reconcileLedger, summarizeLedger } from '../src/store/ledger.js';
import { runCli, startServe } from './helpers/cli.js';
import { leaveJournalBehind, scratchDir } from './helpers/emulator.js';
import { authorizeAndApprove, http, postJson } from './helpers/oauth.js';

const entry = (seq: number, client_id: string, amount: number, grant_id = `grant_${client_id}`): ChargeEntry => ({
  seq,
  at: 1_700_000_000_000 + seq,
  client_id,
  grant_id,
  route: 'POST /chat/ask',
  amount,
  unit: 'AKh',
  idempotency_key: null,
});
const text = (entries: ChargeEntry[]) => entries.map((e) => `${JSON.stringify(e)}\n`).join('');
const totalsOf = (entries: ChargeEntry[]): ChargeTotals => {
  const totals: ChargeTotals = { count: entries.length, by_client: {}, by_grant: {} };
  for (const e of entries) {
    totals.by_client[e.client_id] = Math.round(((totals.by_client[e.client_id] ?? 0) + e.amount) * 1000) / 1000;
    totals.by_grant[e.grant_id] = Math.round(((totals.by_grant[e.grant_id] ?? 0) + e.amount) * 1000) / 1000;
  }
  return totals;
};
/** ChargeTotals.ledger_chain of these lines (totalsOf leaves it out, as a state from before it has none). */
const chainOf = (entries: ChargeEntry[]) => ledgerChain(entries.map((e) => JSON.stringify(e)));
const refusal = (run: () => unknown): StateFileError => {
  try {
    run();
  } catch (e) {
    expect(e).toBeInstanceOf(StateFileError);
    return e as StateFileError;
  }
  throw new Error('expected a refusal');
};

describe('a ledger of a megabyte or more is read on the writer thread during the state file, with the same results', () => {
  // 9 000 charges of two clients: about 1.3 MB of ledger.
  const many = Array.from({ length: 9_000 }, (_, i) => entry(i + 1, i % 2 ? 'c1' : 'c2', i % 3 ? 0.1 : 2));
  async function files(totals: ChargeTotals, ledger: string, edit = (stateText: string) => stateText) {
    const dir = await scratchDir();
    const stateFile = join(dir, 'state.json');
    const ledgerFile = join(dir, 'state.charges.jsonl');
    expect(Buffer.byteLength(ledger)).toBeGreaterThan(1 << 20);
    await writeFile(stateFile, edit([...stateChunks({ ...emptyState(), charges: totals }, 0)].join('')));
    await writeFile(ledgerFile, ledger);
    return { stateFile, ledgerFile };
  }
  const load = async (stateFile: string) => {
    const notices: string[] = [];
    const persistence = new FilePersistence(stateFile, { onNotice: (line) => notices.push(line) });
    try {
      return { state: await persistence.load(), notices };
    } finally {
      await persistence.close();
    }
  };

  it('matching: loads with nothing to say, and a state without the chain takes it; after a crash two uncommitted lines after them are dropped durably with the same notice as a small ledger gets', async () => {
    const exact = await files(totalsOf(many), text(many));
    const loaded = await load(exact.stateFile);
    expect(loaded.notices).toEqual([]);
    expect(loaded.state?.charges.ledger_chain).toBe(chainOf(many));
    expect(await readFile(exact.ledgerFile, 'utf8')).toBe(text(many));
    // With the chain: the writer thread's summary carries it, and a line edited within the sums is refused.
    const chained = { ...totalsOf(many), ledger_chain: chainOf(many) };
    await expect(load((await files(chained, text(many))).stateFile)).resolves.toMatchObject({ notices: [] });
    const retimed = text(many).replace(`"at":${many[5]!.at},`, `"at":${many[5]!.at + 1},`);
    await expect(load((await files(chained, retimed)).stateFile)).rejects.toThrow(/are not the lines the state recorded/);
    const extra = [entry(9_001, 'c1', 0.1), entry(9_002, 'c2', 0.1)];
    const { stateFile, ledgerFile } = await files(totalsOf(many), text([...many, ...extra]));
    await leaveJournalBehind(stateFile);
    const { state, notices } = await load(stateFile);
    expect(state?.charges.count).toBe(9_000);
    expect(notices).toEqual([droppedLinesNotice(ledgerFile, { committed: 9_000, uncommitted: 2 })]);
    expect(await readFile(ledgerFile, 'utf8')).toBe(text(many));
  });

  it('a tampered total, a bad line, a count JSON cannot carry (1e999): refused with the message the check on the main thread gives, nothing changed', async () => {
    const tampered = { ...totalsOf(many), by_client: { ...totalsOf(many).by_client, c1: 1 } };
    const damaged = text(many).replace('"seq":4500,', '"seq":"4500",');
    for (const [totals, ledger, edit] of [
      [tampered, text(many), undefined],
      [totalsOf(many), damaged, undefined],
      [totalsOf(many), text(many), (t: string) => t.replace('"count":9000', '"count":1e999')],
    ] as const) {
      const { stateFile, ledgerFile } = await files(totals, ledger, edit);
      const expected = refusal(() =>
        reconcileLedger(stateFile, ledgerFile, { ...totals, count: edit ? Infinity : totals.count }, ledger, true),
      ).message;
      const before = await readFile(ledgerFile, 'utf8');
      await expect(load(stateFile)).rejects.toThrow(expected);
      expect(await readFile(ledgerFile, 'utf8')).toBe(before);
    }
  });
});

describe('charge ledger: the first count lines are the committed charges, and they sum to the totals', () => {
  const three = [entry(1, 'c1', 0.1), entry(2, 'c2', 2), entry(3, 'c1', 0.2)];

  it("the writer thread's summary matches exactly the ledgers reconcileLedger accepts as they are (property, 500 runs)", () => {
    const ledgers = fc.record({
      entries: fc.array(fc.record({ client: fc.constantFrom('c1', 'c2', 'c3'), amount: fc.constantFrom(0.1, 2, 0.001, 0.3) }), {
        maxLength: 8,
      }),
      totals: fc.constantFrom('same', 'count+1', 'count-1', 'total', 'extra client', 'infinite count'),
      chained: fc.boolean(),
      ledger: fc.constantFrom('same', 'missing', 'extra line', 'torn tail', 'bad line', 'last line gone', 'time edited'),
      afterCrash: fc.boolean(),
    });
    fc.assert(
      fc.property(ledgers, ({ entries: drawn, totals: t, chained, ledger: l, afterCrash }) => {
        const entries = drawn.map((d, i) => entry(i + 1, d.client, d.amount));
        const totals = totalsOf(entries);
        if (t === 'count+1') totals.count++;
        if (t === 'count-1') totals.count--;
        if (t === 'total' && entries.length > 0) totals.by_client[entries[0]!.client_id] = 99;
        if (t === 'extra client') totals.by_client['c9'] = 0.1;
        if (t === 'infinite count') totals.count = Infinity;
        if (chained && entries.length > 0) totals.ledger_chain = chainOf(entries);
        let written = text(entries);
        if (l === 'extra line') written += text([entry(entries.length + 1, 'c1', 0.1)]);
        if (l === 'torn tail') written += '{"seq":';
        if (l === 'bad line') written = written.replace('"seq":1,', '"seq":"1",');
        if (l === 'last line gone') written = text(entries.slice(0, -1));
        if (l === 'time edited') written = written.replace(/"at":(\d+)/, (_m, at: string) => `"at":${Number(at) + 1}`);
        const ledger = l === 'missing' ? null : written;
        let accepted: boolean;
        try {
          accepted = reconcileLedger('s.json', 'l', totals, ledger, afterCrash).uncommitted === 0;
        } catch (e) {
          expect(e).toBeInstanceOf(StateFileError);
          accepted = false;
        }
        expect(ledgerMatches(summarizeLedger(ledger), totals)).toBe(accepted);
        // What a start fills into a state without the chain is the same from either side.
        if (accepted) expect(summarizeLedger(ledger).chain).toBe(reconcileLedger('s.json', 'l', totals, ledger, afterCrash).chain);
      }),
      { numRuns: 500 },
    );
  });

  it('committed lines that sum (in thousandths) to the totals are accepted; nothing to drop', () => {
    const tenths = [1, 2, 3].map((seq) => entry(seq, 'c1', 0.1));
    expect(reconcileLedger('s.json', 's.charges.jsonl', totalsOf(tenths), text(tenths), true)).toEqual({
      committed: 3,
      uncommitted: 0,
      keep: null,
      chain: chainOf(tenths),
    });
    expect(totalsOf(tenths).by_client.c1).toBe(0.3);
  });

  it('after a crash, lines beyond the count and a torn last line without its newline are uncommitted: dropped, and counted', () => {
    const ledger = `${text([...three, entry(4, 'c1', 0.1), entry(5, 'c2', 0.1)])}{"seq":6,"at":17`;
    expect(reconcileLedger('s.json', 's.charges.jsonl', totalsOf(three), ledger, true)).toEqual({
      committed: 3,
      uncommitted: 3,
      keep: text(three),
      chain: chainOf(three),
    });
  });

  it('after a clean stop, lines beyond the count were acknowledged (a state file older than its ledger): refused, never dropped', () => {
    const beyond = text([...three, entry(4, 'c1', 0.1), entry(5, 'c2', 0.1)]);
    const error = refusal(() => reconcileLedger('/d/state.json', '/d/state.charges.jsonl', totalsOf(three), beyond, false));
    expect(error.message).toContain('/d/state.json');
    expect(error.message).toContain('/d/state.charges.jsonl');
    expect(error.message).toContain('the ledger holds 2 lines (seq 4–5) beyond the 3 charges the state counts');
    expect(error.message).toContain('the state file is older than its ledger');
    expect(error.message).toContain('Put back the newest state file');
    expect(error.message).toContain(moveAwayCommand('/d/state.json'));
    expect(refusal(() => reconcileLedger('s.json', 'l', totalsOf(three), `${text(three)}{"seq":4`, false)).message).toContain(
      'the ledger holds a last line without its newline beyond the 3 charges',
    );
    // Exactly the committed lines: nothing beyond them to account for, crash or not.
    expect(reconcileLedger('s.json', 'l', totalsOf(three), text(three), false)).toEqual({
      committed: 3,
      uncommitted: 0,
      keep: null,
      chain: chainOf(three),
    });
  });

  it('a committed line edited so that every sum still agrees (amounts moved between two lines of one client and grant, a time changed): refused by the chain', () => {
    const two = [entry(1, 'c1', 0.1), entry(2, 'c1', 2)];
    const chained = { ...totalsOf(two), ledger_chain: chainOf(two) };
    expect(reconcileLedger('s.json', 'l', chained, text(two), false)).toMatchObject({ uncommitted: 0 });
    const moved = text([entry(1, 'c1', 2), entry(2, 'c1', 0.1)]);
    const retimed = text(two).replace(`"at":${two[0]!.at}`, `"at":${two[0]!.at + 60_000}`);
    for (const edited of [moved, retimed]) {
      expect(refusal(() => reconcileLedger('s.json', 'l', chained, edited, false)).message).toContain(
        "the ledger's committed lines (seq 1–2) sum to the state's totals, but are not the lines the state recorded",
      );
      // The sums alone, as a state from before the chain has them, accept it.
      expect(reconcileLedger('s.json', 'l', totalsOf(two), edited, false)).toMatchObject({ uncommitted: 0 });
    }
  });

  it('no state file and no ledger, or an empty one: a fresh start', () => {
    expect(reconcileLedger('s.json', 's.charges.jsonl', null, null, true)).toMatchObject({ uncommitted: 0 });
    expect(reconcileLedger('s.json', 's.charges.jsonl', null, '', true)).toMatchObject({ uncommitted: 0 });
  });

  it('a ledger with lines beside no state file, or beside a state that counts none after a clean stop: refused, naming both files and the way out', () => {
    for (const [totals, afterCrash] of [
      [null, true],
      [null, false],
      [totalsOf([]), false],
    ] as const) {
      const error = refusal(() => reconcileLedger('/d/state.json', '/d/state.charges.jsonl', totals, text(three), afterCrash));
      expect(error.message).toContain('/d/state.json');
      expect(error.message).toContain('/d/state.charges.jsonl');
      expect(error.message).toContain('seq 1–3');
      // No state file: the ledger goes too. A state that counts none: all its files go together.
      if (totals === null) expect(error.message).toContain("mv '/d/state.charges.jsonl' '/d/state.charges.jsonl.bak'");
      else expect(error.message).toContain(moveAwayCommand('/d/state.json'));
      expect(moveAwayCommand('/d/state.json')).toContain("'/d/state.json' '/d/state.journal.jsonl' '/d/state.charges.jsonl'");
    }
  });

  it("after a crash, a state that counts none beside lines of its first charges' commit, cut short: dropped", () => {
    expect(reconcileLedger('s.json', 'l', totalsOf([]), `${text(three.slice(0, 1))}{"seq":2`, true)).toEqual({
      committed: 0,
      uncommitted: 2,
      keep: '',
      chain: undefined,
    });
  });

  it('a ledger missing, or shorter than the count: refused, naming the first missing seq', () => {
    expect(refusal(() => reconcileLedger('s.json', 'l', totalsOf(three), null, true)).message).toContain('the ledger is missing');
    expect(refusal(() => reconcileLedger('s.json', 'l', totalsOf(three), text(three.slice(0, 1)), true)).message).toContain(
      'seq 2–3 missing',
    );
    // A committed line torn (no newline) is not there.
    expect(refusal(() => reconcileLedger('s.json', 'l', totalsOf(three), text(three).slice(0, -1), true)).message).toContain(
      'seq 3 missing',
    );
  });

  it.each([
    ['not JSON', '{"seq":2,'],
    ['an empty line', ''],
    ['another seq', JSON.stringify(entry(7, 'c2', 2))],
    ['an amount as text', JSON.stringify({ ...entry(2, 'c2', 2), amount: '2' })],
    ['another unit', JSON.stringify({ ...entry(2, 'c2', 2), unit: 'EUR' })],
    ['a missing client_id', JSON.stringify({ ...entry(2, 'c2', 2), client_id: undefined })],
    ['an unknown field', JSON.stringify({ ...entry(2, 'c2', 2), extra: 1 })],
  ])('a committed line that is %s is refused, naming its seq', (_what, line) => {
    const ledger = `${text(three.slice(0, 1))}${line}\n${text(three.slice(2))}`;
    expect(refusal(() => reconcileLedger('s.json', 'l', totalsOf(three), ledger, true)).message).toMatch(/line 2 is not charge seq 2/);
  });

  it('totals that differ from the sums of the committed lines are refused, naming the client or grant', () => {
    const tampered = totalsOf(three);
    tampered.by_client.c1 = 0.4;
    expect(refusal(() => reconcileLedger('s.json', 'l', tampered, text(three), true)).message).toContain(
      'client c1 is 0.4 AKh, but the ledger',
    );
    const extra = totalsOf(three);
    extra.by_grant.grant_x = 1;
    expect(refusal(() => reconcileLedger('s.json', 'l', extra, text(three), true)).message).toContain('grant grant_x is 1 AKh');
    const missing = totalsOf(three);
    delete missing.by_client.c2;
    expect(refusal(() => reconcileLedger('s.json', 'l', missing, text(three), true)).message).toContain('client c2 is missing');
  });
});

/** A state with two committed charges of one client (0.5 AKh each), written by an emulator that stopped cleanly. */
async function stateWithCharges(dir: string) {
  const state = join(dir, 'state.json');
  const ledger = join(dir, 'state.charges.jsonl');
  const emu = await Emulator.start({ port: 0, authPort: 0, state, prices: { ask: 0.5 } });
  const flow = await authorizeAndApprove(emu);
  for (let i = 0; i < 2; i++)
    expect(
      (await postJson(`${emu.baseUrl}/chat/ask`, { question: 'Kaution' }, { authorization: `Bearer ${flow.tokens!.access_token}` })).status,
    ).toBe(200);
  await emu.stop();
  return { state, ledger, client_id: flow.client_id, lines: (await readFile(ledger, 'utf8')).trim().split('\n') };
}

const serveOn = (state: string, ...flags: string[]) =>
  runCli(['serve', '--port', '0', '--auth-port', '0', '--json', '--state', state, ...flags]);

/** Serve refused: exit 3, one message on stderr naming both files and the way out, nothing on stdout, both files as they were. */
async function expectRefusal(state: string, ledger: string, what: RegExp) {
  const before = {
    state: existsSync(state) ? await readFile(state, 'utf8') : null,
    ledger: existsSync(ledger) ? await readFile(ledger, 'utf8') : null,
  };
  const res = await serveOn(state);
  expect(res.code, res.stderr).toBe(3);
  expect(res.stdout).toBe('');
  expect(res.stderr).toContain(state);
  expect(res.stderr).toContain(ledger);
  expect(res.stderr).toMatch(what);
  expect(res.stderr).toContain('from the same backup or snapshot');
  expect(res.stderr).not.toContain('    at ');
  expect(existsSync(state) ? await readFile(state, 'utf8') : null).toBe(before.state);
  expect(existsSync(ledger) ? await readFile(ledger, 'utf8') : null).toBe(before.ledger);
  expect(existsSync(`${state}.lock`)).toBe(false);
  return res.stderr;
}

describe('serve checks the charge ledger against the state at start', () => {
  it('the state file moved away as advised (mv state.json state.json.bak): serve refuses with exit 3 naming both files, and the ledger is unchanged', async () => {
    const { state, ledger } = await stateWithCharges(await scratchDir());
    await rename(state, `${state}.bak`);
    const stderr = await expectRefusal(state, ledger, /the ledger holds 2 charge lines \(seq 1–2\), but there is no state file/);
    expect(stderr).toContain(`mv '${ledger}' '${ledger}.bak'`);
    expect(existsSync(state)).toBe(false);
    // Moving both away, as the message says, starts over.
    await rename(ledger, `${ledger}.bak`);
    const fresh = await startServe(['--state', state]);
    expect(await fresh.stop(), fresh.stderr()).toBe(0);
  });

  it('a damaged state file: the plain mv alone is refused; the command serve prints moves the three files away together, and the next start begins a ledger of its own at seq 1, the old files kept byte for byte', async () => {
    const { state, ledger } = await stateWithCharges(await scratchDir());
    await writeFile(state, (await readFile(state, 'utf8')).slice(0, 120));
    const damaged = await serveOn(state);
    expect(damaged.code, damaged.stderr).toBe(3);
    expect(damaged.stderr).toContain(`state file ${state} is not valid JSON`);
    expect(damaged.stderr).toContain(moveAwayCommand(state));
    const before = { state: await readFile(state), ledger: await readFile(ledger) };
    // What the old advice said, and what a person tries first: never a start beside the old ledger.
    await rename(state, `${state}.bak`);
    await expectRefusal(state, ledger, /there is no state file/);
    await rename(`${state}.bak`, state);
    // The command as printed, run by a shell.
    const from = damaged.stderr.indexOf('for f in ');
    const command = damaged.stderr.slice(from, damaged.stderr.indexOf('; done', from) + '; done'.length);
    expect(command).toBe(moveAwayCommand(state));
    await promisify(execFile)('sh', ['-c', command]);
    expect([existsSync(state), existsSync(ledger)]).toEqual([false, false]);
    expect(await readFile(`${state}.bak`)).toEqual(before.state);
    expect(await readFile(`${ledger}.bak`)).toEqual(before.ledger);
    const emu = await Emulator.start({ port: 0, authPort: 0, state, prices: { ask: 0.5 } });
    const flow = await authorizeAndApprove(emu);
    const ask = await postJson(
      `${emu.baseUrl}/chat/ask`,
      { question: 'Kaution' },
      { authorization: `Bearer ${flow.tokens!.access_token}` },
    );
    expect(ask.status).toBe(200);
    await emu.stop();
    const fresh = (await readFile(ledger, 'utf8')).trim().split('\n');
    expect(fresh.map((line) => (JSON.parse(line) as ChargeEntry).seq)).toEqual([1]);
    expect(await readFile(`${ledger}.bak`)).toEqual(before.ledger);
    const again = await startServe(['--state', state]);
    expect(await again.stop(), again.stderr()).toBe(0);
  });

  it('a fresh state put beside an old ledger (count 0): exit 3, never new charges numbered 1, 2, … after the old ones', async () => {
    const dir = await scratchDir();
    const { state, ledger } = await stateWithCharges(dir);
    const other = join(dir, 'other.json');
    await (await Emulator.start({ port: 0, authPort: 0, state: other })).stop();
    await rename(other, state);
    const stderr = await expectRefusal(state, ledger, /the ledger holds 2 charge lines \(seq 1–2\), but the state records no charges/);
    expect(stderr).toContain(moveAwayCommand(state));
  });

  it('a tampered total: exit 3 naming the client whose total disagrees with the ledger', async () => {
    const { state, ledger, client_id } = await stateWithCharges(await scratchDir());
    const json = JSON.parse(await readFile(state, 'utf8'));
    json.charges.by_client[client_id] = 0.5;
    await writeFile(state, JSON.stringify(json));
    await expectRefusal(
      state,
      ledger,
      new RegExp(`client ${client_id} is 0.5 AKh, but the ledger's committed lines \\(seq 1–2\\) sum to 1 AKh`),
    );
  });

  it('a truncated ledger: exit 3 naming the first missing seq', async () => {
    const { state, ledger, lines } = await stateWithCharges(await scratchDir());
    await writeFile(ledger, `${lines[0]}\n`);
    await expectRefusal(state, ledger, /holds 1 complete line, but the state counts 2 charges \(seq 2 missing\)/);
  });

  it('a deleted ledger: exit 3', async () => {
    const { state, ledger } = await stateWithCharges(await scratchDir());
    await rm(ledger);
    await expectRefusal(state, ledger, /the ledger is missing, and the state counts 2 charges/);
  });

  it('a bad line inside the committed part: exit 3 at start naming its seq, not a 500 from GET /_admin/charges later', async () => {
    const { state, ledger, lines } = await stateWithCharges(await scratchDir());
    await writeFile(ledger, `${lines[0]!.replace('"amount":0.5', '"amount":"0.5"')}\n${lines[1]}\n`);
    await expectRefusal(state, ledger, /line 1 is not charge seq 1: "amount" is not a number/);
  });

  it('after a crash (its journal left behind), uncommitted lines after the committed ones are dropped at start, with one notice on stderr (nothing on stdout but the ready line, also with --json)', async () => {
    const { state, ledger, lines } = await stateWithCharges(await scratchDir());
    const committed = `${lines.join('\n')}\n`;
    const next = { ...JSON.parse(lines[1]!), seq: 3 };
    await appendFile(ledger, `${JSON.stringify(next)}\n{"seq":4,"at":`);
    await leaveJournalBehind(state);
    const s = await startServe(['--state', state]);
    expect(JSON.parse(s.readyLine)).toHaveProperty('base_url');
    expect(s.stderr()).toContain(`agent-access: dropped 2 uncommitted lines (seq 3–4) from the end of charge ledger ${ledger}`);
    expect(
      s
        .stderr()
        .split('\n')
        .filter((line) => line.includes('uncommitted')),
    ).toHaveLength(1);
    expect(await readFile(ledger, 'utf8')).toBe(committed);
    const report = await http(`${s.ready.admin_url}/charges`, { headers: { authorization: `Bearer ${s.ready.admin_token}` } });
    expect(report.json()).toMatchObject({ total: 1, entries: [{ seq: 1 }, { seq: 2 }] });
    expect(await s.stop(), s.stderr()).toBe(0);
    expect(s.stdoutRest()).toBe('');
  });

  it("after a clean stop, ledger lines beyond the state's count (a state file put back from an older backup): exit 3, and every acknowledged line kept", async () => {
    const dir = await scratchDir();
    const { state, ledger } = await stateWithCharges(dir);
    const older = await readFile(state, 'utf8');
    // Two more charges, acknowledged, then the older state file put back beside the newer ledger.
    const emu = await Emulator.start({ port: 0, authPort: 0, state, prices: { ask: 0.5 } });
    const flow = await authorizeAndApprove(emu);
    for (let i = 0; i < 2; i++)
      expect(
        (await postJson(`${emu.baseUrl}/chat/ask`, { question: 'Kaution' }, { authorization: `Bearer ${flow.tokens!.access_token}` }))
          .status,
      ).toBe(200);
    await emu.stop();
    await writeFile(state, older);
    expect((await readFile(ledger, 'utf8')).trim().split('\n')).toHaveLength(4);
    const stderr = await expectRefusal(state, ledger, /the ledger holds 2 lines \(seq 3–4\) beyond the 2 charges the state counts/);
    expect(stderr).toContain('Put back the newest state file');
  });

  it('a committed line edited so that the totals still agree (its time changed): exit 3, the chain in the state names it', async () => {
    const { state, ledger, lines } = await stateWithCharges(await scratchDir());
    const stored = JSON.parse(await readFile(state, 'utf8')) as { charges: ChargeTotals };
    expect(stored.charges.ledger_chain).toBe(ledgerChain(lines));
    const first = JSON.parse(lines[0]!) as ChargeEntry;
    await writeFile(ledger, `${JSON.stringify({ ...first, at: first.at - 3_600_000 })}\n${lines[1]}\n`);
    await expectRefusal(state, ledger, /are not the lines the state recorded .*: a line was edited after it was written/);
  });

  it('a state from before the chain (no charges.ledger_chain) starts on its sums, takes the chain from its ledger, and chains on', async () => {
    const { state, ledger } = await stateWithCharges(await scratchDir());
    const stored = JSON.parse(await readFile(state, 'utf8')) as { charges: ChargeTotals };
    delete stored.charges.ledger_chain;
    await writeFile(state, JSON.stringify(stored));
    const emu = await Emulator.start({ port: 0, authPort: 0, state, prices: { ask: 0.5 } });
    const flow = await authorizeAndApprove(emu);
    expect(
      (await postJson(`${emu.baseUrl}/chat/ask`, { question: 'Kaution' }, { authorization: `Bearer ${flow.tokens!.access_token}` })).status,
    ).toBe(200);
    await emu.stop();
    const lines = (await readFile(ledger, 'utf8')).trim().split('\n');
    expect(lines).toHaveLength(3);
    expect((JSON.parse(await readFile(state, 'utf8')) as { charges: ChargeTotals }).charges.ledger_chain).toBe(ledgerChain(lines));
    const again = await startServe(['--state', state]);
    expect(again.stderr()).not.toContain('does not belong');
    expect(await again.stop(), again.stderr()).toBe(0);
  });

  it('a ledger line damaged while serve runs: GET /_admin/charges answers a problem naming the line, without a stack trace', async () => {
    const { state, ledger, lines } = await stateWithCharges(await scratchDir());
    const s = await startServe(['--state', state]);
    await writeFile(ledger, `${lines[0]}\n{"seq":2}\n`);
    const res = await http(`${s.ready.admin_url}/charges`, { headers: { authorization: `Bearer ${s.ready.admin_token}` } });
    expect(res.status).toBe(500);
    expect(res.json()).toMatchObject({ type: 'urn:agent-access:error:ledger_damaged' });
    expect(res.json().detail).toContain('line 2 is not charge seq 2');
    expect(res.text).not.toContain('    at ');
  });
});

describe('GET /_admin/charges: one consistent view', () => {
  it(
    "while charges are recorded concurrently: each view holds every charge answered before it was asked for, is the start of the final ledger, and its totals are its entries' sums",
    { timeout: 60_000 },
    async () => {
      const dir = await scratchDir();
      const emu = await Emulator.start({
        port: 0,
        authPort: 0,
        state: join(dir, 'state.json'),
        prices: { ask: 0.1 },
        rateLimit: '100000/min',
      });
      try {
        const flows = await Promise.all([authorizeAndApprove(emu), authorizeAndApprove(emu)]);
        const admin = { authorization: `Bearer ${emu.adminToken}` };
        let asking = true;
        let sent = 0;
        let answered = 0;
        const asks = (async () => {
          const all: Promise<unknown>[] = [];
          for (let wave = 0; wave < 15; wave++) {
            const batch = Array.from({ length: 20 }, (_, i) => {
              sent++;
              return postJson(
                `${emu.baseUrl}/chat/ask`,
                { question: 'Kaution' },
                { authorization: `Bearer ${flows[i % 2]!.tokens!.access_token}` },
              ).then((res) => {
                expect(res.status).toBe(200);
                answered++;
              });
            });
            all.push(...batch);
            await Promise.all(batch);
          }
          await Promise.all(all);
          asking = false;
        })();
        const thousandths = (n: number) => Math.round(n * 1000);
        const views: ChargeEntry[][] = [];
        let sawPartial = false;
        while (asking || views.length === 0) {
          const answeredBefore = answered;
          const report = (await http(`${emu.adminUrl}/charges`, { headers: admin })).json() as {
            total: number;
            clients: Array<{ client_id: string; total: number; charges: number }>;
            entries: ChargeEntry[];
          };
          views.push(report.entries);
          // A charge whose answer went out is durable, and so in every view asked for after it; none is made up.
          expect(report.entries.length).toBeGreaterThanOrEqual(answeredBefore);
          expect(report.entries.length).toBeLessThanOrEqual(sent);
          expect(report.entries.map((e) => e.seq)).toEqual(report.entries.map((_e, i) => i + 1));
          expect(thousandths(report.total)).toBe(report.entries.reduce((sum, e) => sum + thousandths(e.amount), 0));
          for (const c of report.clients) {
            const mine = report.entries.filter((e) => e.client_id === c.client_id);
            expect(c.charges).toBe(mine.length);
            expect(thousandths(c.total)).toBe(mine.reduce((sum, e) => sum + thousandths(e.amount), 0));
          }
          if (report.entries.length > 0 && report.entries.length < 300) sawPartial = true;
        }
        await asks;
        const final = (await http(`${emu.adminUrl}/charges`, { headers: admin })).json();
        expect(final.entries).toHaveLength(300);
        expect(final.total).toBe(30);
        // No view saw a line that later changed or went: each is the start of the ledger as it ends.
        for (const view of views) expect(view).toEqual(final.entries.slice(0, view.length));
        // The views above were taken while charges were being recorded, not only before or after.
        expect(sawPartial).toBe(true);
        expect(views.length).toBeGreaterThan(3);
      } finally {
        await emu.stop();
      }
    },
  );
});
