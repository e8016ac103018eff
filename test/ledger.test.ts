import { existsSync } from 'node:fs';
import { readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ChargeEntry } from '../src/core/state/charges.js';
import { Emulator } from '../src/server/emulator.js';
import { moveAwayCommand } from '../src/store/state-files.js';
import { runCli, startServe } from './helpers/cli.js';
import { leaveJournalBehind, scratchDir } from './helpers/emulator.js';
import { authorizeAndApprove, http, postJson } from './helpers/oauth.js';

/**
 * Charges have one source of truth (issue 46): the state's `charge_ledger`, committed in the journal record of the
 * change that caused them. The ledger file beside it (`state.charges.jsonl`) is written from it; a start rewrites a
 * ledger file that does not match, so a crash leaves nothing to reconcile. That the state's charges sum to its totals
 * is checked in test/unit/state-charges.test.ts.
 */

describe('serve writes the ledger file from the state', () => {
  it('a deleted, truncated or edited ledger file is rewritten at start from the charges in the state, with one notice; `agent-access charges` answers as before', async () => {
    const { state, ledger, lines } = await stateWithCharges(await scratchDir());
    const before = await runCli(['charges', '--state', state, '--json']);
    expect(before.code, before.stderr).toBe(0);
    for (const [damage, why] of [
      [() => rm(ledger), 'it was missing'],
      [() => writeFile(ledger, `${lines[0]}\n`), 'it lacked the last charges'],
      [
        () => writeFile(ledger, `${lines[0]!.replace('"amount":0.5', '"amount":5')}\n${lines[1]}\n`),
        'it differed from the charges the state holds',
      ],
    ] as const) {
      await damage();
      const s = await startServe(['--state', state]);
      expect(s.stderr()).toContain(`agent-access: rewrote charge ledger ${ledger} from the 2 charges in ${state}: ${why}`);
      const report = await http(`${s.ready.admin_url}/charges`, { headers: { authorization: `Bearer ${s.ready.admin_token}` } });
      expect(report.json()).toMatchObject({ total: 1, entries: [{ seq: 1 }, { seq: 2 }] });
      expect(await s.stop(), s.stderr()).toBe(0);
      expect((await readFile(ledger, 'utf8')).trim().split('\n')).toEqual(lines);
    }
    const after = await runCli(['charges', '--state', state, '--json']);
    expect(after.stdout).toBe(before.stdout);
  });

  it('after a crash (its journal left behind), a ledger file that lacks the last charges is completed from the state (nothing on stdout but the ready line)', async () => {
    const { state, ledger, lines } = await stateWithCharges(await scratchDir());
    await writeFile(ledger, `${lines[0]}\n{"seq":2,"at":`);
    await leaveJournalBehind(state);
    const s = await startServe(['--state', state]);
    expect(JSON.parse(s.readyLine)).toHaveProperty('base_url');
    expect(s.stderr()).toContain(`rewrote charge ledger ${ledger}`);
    expect(await readFile(ledger, 'utf8')).toBe(`${lines.join('\n')}\n`);
    expect(await s.stop(), s.stderr()).toBe(0);
    expect(s.stdoutRest()).toBe('');
  });

  it('the state file moved away alone (mv state.json state.json.bak): serve refuses with exit 3 naming both files, and the ledger is unchanged; moved away too, a fresh start', async () => {
    const { state, ledger } = await stateWithCharges(await scratchDir());
    await rename(state, `${state}.bak`);
    const stderr = await expectRefusal(state, ledger, /it holds 2 charge lines, but there is no state file/);
    expect(stderr).toContain(`mv '${ledger}' '${ledger}.bak'`);
    await rename(ledger, `${ledger}.bak`);
    const fresh = await startServe(['--state', state]);
    expect(await fresh.stop(), fresh.stderr()).toBe(0);
  });

  it('a fresh state put beside an old ledger (count 0): exit 3, never new charges numbered 1, 2, … after the old ones', async () => {
    const dir = await scratchDir();
    const { state, ledger } = await stateWithCharges(dir);
    const other = join(dir, 'other.json');
    await (await Emulator.start({ port: 0, authPort: 0, state: other })).stop();
    await rename(other, state);
    await expectRefusal(state, ledger, /it holds 2 charge lines, but the state records no charges/);
  });

  it('a tampered total: exit 3 naming the client, and the move-away command', async () => {
    const { state, ledger, client_id } = await stateWithCharges(await scratchDir());
    const json = JSON.parse(await readFile(state, 'utf8'));
    json.charges.by_client[client_id] = 0.5;
    await writeFile(state, JSON.stringify(json));
    const stderr = await expectRefusal(
      state,
      ledger,
      new RegExp(`charges of client ${client_id} sum to 1 AKh, but "charges.by_client" says 0.5`),
    );
    expect(stderr).toContain(moveAwayCommand(state));
  });

  it('a state file written before the charges moved into it (no charge_ledger) takes them from its ledger file, checked by its sums; one whose ledger does not match is refused', async () => {
    const { state, ledger, lines } = await stateWithCharges(await scratchDir());
    const json = JSON.parse(await readFile(state, 'utf8'));
    delete json.charge_ledger;
    json.charges.ledger_chain = 'a'.repeat(64);
    await writeFile(state, JSON.stringify(json));
    await writeFile(ledger, `${lines[0]}\n`);
    await expectRefusal(
      state,
      ledger,
      /was written before the charges moved into it, and its charge ledger .* does not belong to it: it holds 1 charge,/,
    );
    await writeFile(ledger, `${lines.join('\n')}\n`);
    const emu = await Emulator.start({ port: 0, authPort: 0, state, prices: { ask: 0.5 } });
    const flow = await authorizeAndApprove(emu);
    const ask = await postJson(
      `${emu.baseUrl}/chat/ask`,
      { question: 'Kaution' },
      { authorization: `Bearer ${flow.tokens!.access_token}` },
    );
    expect(ask.status).toBe(200);
    await emu.stop();
    const after = JSON.parse(await readFile(state, 'utf8'));
    expect(Object.keys(after.charge_ledger)).toEqual(['1', '2', '3']);
    expect((await readFile(ledger, 'utf8')).trim().split('\n').slice(0, 2)).toEqual(lines);
    expect(after.charges).not.toHaveProperty('ledger_chain');
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

/** Serve refused: exit 3, one message on stderr naming the files and the way out, nothing on stdout, both files as they were. */
async function expectRefusal(state: string, ledger: string, what: RegExp) {
  const before = {
    state: existsSync(state) ? await readFile(state, 'utf8') : null,
    ledger: existsSync(ledger) ? await readFile(ledger, 'utf8') : null,
  };
  const res = await serveOn(state);
  expect(res.code, res.stderr).toBe(3);
  expect(res.stdout).toBe('');
  expect(res.stderr).toContain(state);
  expect(res.stderr).toMatch(what);
  expect(res.stderr).toContain('Nothing was changed');
  expect(res.stderr).not.toContain('    at ');
  expect(existsSync(state) ? await readFile(state, 'utf8') : null).toBe(before.state);
  expect(existsSync(ledger) ? await readFile(ledger, 'utf8') : null).toBe(before.ledger);
  expect(existsSync(`${state}.lock`)).toBe(false);
  return res.stderr;
}
