/**
 * How the state file stays current (docs/serve.md "How the state is stored"): a commit appends one journal record with
 * what changed; a start replays it; past a size the state is folded back into the state file. Real files in temp
 * dirs, the real writer thread, the core in-process on a manual clock.
 */
import { isUtf8 } from 'node:buffer';
import { existsSync } from 'node:fs';
import { appendFile, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { ManualClock } from '../src/core/clock.js';
import { Core } from '../src/core/core.js';
import { StateFileError } from '../src/core/errors.js';
import { issueTokensWithoutConsent } from '../src/core/issue-tokens.js';
import { exchangeToken } from '../src/core/token-endpoint.js';
import { FilePersistence, readStateAt, type FilePersistenceOptions } from '../src/store/file-persistence.js';
import { readStateFile, readStateFileByEntries, stateChunks, wholeSequencesEnd } from '../src/store/state-text.js';
import { loadFixtures } from '../src/store/fixtures.js';
import { generateSigningKey } from '../src/core/keys.js';
import { Repository, setOwn } from '../src/core/repository.js';
import type { ResearchJob } from '../src/core/jobs.js';
import { BodySource, locationOf } from '../src/store/research-bodies.js';
import { emptyState } from '../src/core/state.js';
import { journalLine } from '../src/store/journal.js';
import { scratchDir } from './helpers/emulator.js';

const T0 = Date.UTC(2026, 2, 1, 9);

async function open(file: string, options: FilePersistenceOptions = {}) {
  const notices: string[] = [];
  const persistence = new FilePersistence(file, { ...options, onNotice: (line) => notices.push(line) });
  const core = await Core.open({ clock: new ManualClock(T0), persistence, persons: (await loadFixtures()).persons });
  core.setUrls({ baseUrl: 'http://127.0.0.1:4100', authUrl: 'http://127.0.0.1:4101' });
  return { core, persistence, notices };
}

const agentTokens = (core: Core) => issueTokensWithoutConsent(core, { scopes: ['ask', 'research'] });
const rotate = (core: Core, clientId: string, refreshToken: string) =>
  exchangeToken(core, { grant_type: 'refresh_token', client_id: clientId, refresh_token: refreshToken });
const journalOf = (file: string) => file.replace(/\.json$/, '.journal.jsonl');
const records = async (file: string) =>
  (await readFile(journalOf(file), 'utf8'))
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { seq: number; changes: [string[], unknown?][] });

describe('the journal: a commit writes what changed, a start replays it', () => {
  it('a new state has its state file (0600) before open resolves; a commit then appends one record with only the places it changed', async () => {
    const file = join(await scratchDir(), 'state.json');
    const { core } = await open(file);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    const baseBefore = await readFile(file);
    const tokens = await agentTokens(core);
    const before = (await records(file)).length;
    (core.clock as ManualClock).advance(1000);
    await rotate(core, tokens.client_id, tokens.refresh_token!);
    const added = (await records(file)).slice(before);
    expect(added).toHaveLength(1);
    // A rotation a second later touches its family and its grant (last use), nothing else: not the other tables, not the file.
    expect(added[0]!.changes.map(([path]) => path[0]).sort()).toEqual(['families', 'grants']);
    expect(await readFile(file)).toEqual(baseBefore);
    expect((await stat(journalOf(file))).mode & 0o777).toBe(0o600);
  });

  it('a start after a stop that was not clean replays every record, and says so in one line', async () => {
    const file = join(await scratchDir(), 'state.json');
    const first = await open(file);
    const tokens = await agentTokens(first.core);
    let refreshToken = tokens.refresh_token!;
    for (let i = 0; i < 5; i++) refreshToken = (await rotate(first.core, tokens.client_id, refreshToken)).refresh_token!;
    // No close: as after kill -9, the journal holds what the state file does not.
    const second = await open(file);
    expect(JSON.stringify(second.core.state)).toBe(JSON.stringify(first.core.state));
    expect(second.notices).toEqual([
      expect.stringMatching(/^replayed \d+ journal records from .*state\.journal\.jsonl \(the last stop was not clean\)$/),
    ]);
    // The newest refresh token works after the restart; the one before it is a replay.
    expect((await rotate(second.core, tokens.client_id, refreshToken)).refresh_token).toMatch(/^aa1\./);
    await second.persistence.close();
  });

  it('a clean stop folds the journal into the state file: at rest the state file alone holds everything', async () => {
    const file = join(await scratchDir(), 'state.json');
    const { core, persistence } = await open(file);
    await agentTokens(core);
    expect(existsSync(journalOf(file))).toBe(true);
    await persistence.close();
    expect(existsSync(journalOf(file))).toBe(false);
    const atRest = JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown>;
    delete atRest.journal_seq;
    expect(JSON.stringify(atRest)).toBe(JSON.stringify(core.state));
  });

  it('kill -9 during an append: a torn last record was never answered; it is dropped with a notice, and later records follow it cleanly', async () => {
    const file = join(await scratchDir(), 'state.json');
    const first = await open(file);
    await agentTokens(first.core);
    const expected = JSON.stringify(first.core.state);
    await appendFile(journalOf(file), '{"seq":99,"changes":[[["grants","g"],{"id":');
    const second = await open(file);
    expect(JSON.stringify(second.core.state)).toBe(expected);
    expect(second.notices.some((n) => /^dropped an unfinished journal record \(\d+ bytes\)/.test(n))).toBe(true);
    await agentTokens(second.core);
    const third = await open(file);
    expect(JSON.stringify(third.core.state)).toBe(JSON.stringify(second.core.state));
    await third.persistence.close();
  });

  it('a damaged record with whole records after it is refused (exit 3): the message names the journal and the way out; nothing is changed', async () => {
    const file = join(await scratchDir(), 'state.json');
    const first = await open(file);
    await agentTokens(first.core);
    await agentTokens(first.core);
    const lines = (await readFile(journalOf(file), 'utf8')).split('\n');
    lines[0] = lines[0]!.slice(0, 20);
    await writeFile(journalOf(file), lines.join('\n'));
    const damaged = await readFile(journalOf(file));
    const error = await open(file).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StateFileError);
    expect((error as Error).message).toMatch(/journal .*state\.journal\.jsonl is damaged at line 1/);
    expect((error as Error).message).toContain('mv ');
    expect(await readFile(journalOf(file))).toEqual(damaged);
  });

  it('a state file moved away while its journal stays: the journal is not replayed onto an empty state; refused, naming both', async () => {
    const file = join(await scratchDir(), 'state.json');
    const { core, persistence } = await open(file, { journalLimit: 1024 });
    for (let i = 0; i < 10; i++) await agentTokens(core);
    await persistence.flush();
    // The journal now continues a state file (its first record is past 1).
    expect((await records(file))[0]!.seq).toBeGreaterThan(1);
    const { rename } = await import('node:fs/promises');
    await rename(file, `${file}.bak`);
    const error = await open(file).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StateFileError);
    expect((error as Error).message).toMatch(/state file .*state\.json is missing, but its journal .*state\.journal\.jsonl is there/);
    expect(existsSync(file)).toBe(false);
  });

  it('a crash after the state file was replaced but before the journal was cut: records the state file holds are skipped by number', async () => {
    const file = join(await scratchDir(), 'state.json');
    const first = await open(file);
    await agentTokens(first.core);
    const journalBefore = await readFile(journalOf(file), 'utf8');
    await agentTokens(first.core);
    await first.persistence.close();
    // The state file holds everything; put back the journal as it was before (its records are all older).
    await writeFile(journalOf(file), journalBefore + (await readFile(journalOf(file), 'utf8').catch(() => '')));
    const second = await open(file);
    expect(JSON.stringify(second.core.state)).toBe(JSON.stringify(first.core.state));
    // One line says what was found and done (docs/serve.md: a restart after a crash says what it does).
    expect(second.notices).toEqual([
      expect.stringMatching(
        /^skipped \d+ journal records? at the start of .*state\.journal\.jsonl that .*state\.json already holds: the last process stopped after writing the state file and before cutting the journal$/,
      ),
    ]);
    await agentTokens(second.core);
    const third = await open(file);
    expect(JSON.stringify(third.core.state)).toBe(JSON.stringify(second.core.state));
    await third.persistence.close();
  });
});

describe('an empty journal', () => {
  it('left by a crash right after it was made, it is removed at the next start, so that after a clean stop the files read as stopped cleanly', async () => {
    const file = join(await scratchDir(), 'state.json');
    const first = await open(file);
    await agentTokens(first.core);
    await first.persistence.close();
    expect(existsSync(journalOf(file))).toBe(false);
    // What a commit or a restore leaves when killed just after making the journal, before anything was appended.
    await writeFile(journalOf(file), '', { mode: 0o600 });
    const second = await open(file);
    expect(second.notices).toEqual([]);
    expect(JSON.stringify(second.core.state)).toBe(JSON.stringify(first.core.state));
    await second.persistence.close();
    // Left, it would make every later start take the files for left by a crash.
    expect(existsSync(journalOf(file))).toBe(false);
  });
});

describe('the state file is read entry by entry', () => {
  it('a file in the entry-per-line layout and the same state written compactly (older versions) read the same, odd keys and strings included', async () => {
    const dir = await scratchDir();
    const state = emptyState();
    const client = (id: string, name: string) => ({
      client_id: id,
      client_id_issued_at: 1,
      client_name: name,
      redirect_uris: ['http://127.0.0.1/cb'],
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none' as const,
    });
    Object.defineProperty(state.clients, '__proto__', {
      value: client('__proto__', 'proto'),
      enumerable: true,
      writable: true,
      configurable: true,
    });
    state.clients['x'] = client('x', 'Zeile\n}\n"grants":{ ü 𝄞');
    state.clients['"quoted":{'] = client('q', '{}');
    const lines = join(dir, 'lines.json');
    const compact = join(dir, 'compact.json');
    await writeFile(lines, [...stateChunks(state, 7)].join(''));
    await writeFile(compact, `${JSON.stringify({ ...state, journal_seq: 7 })}\n`);
    expect((await readFile(lines, 'utf8')).split('\n').length).toBeGreaterThan(4);
    const a = (await readStateFileByEntries(lines)) as typeof state;
    const b = (await readStateFile(compact)) as typeof state;
    expect(JSON.stringify(a)).toBe(JSON.stringify(b));
    expect(Object.keys(a.clients)).toEqual(['__proto__', 'x', '"quoted":{']);
    expect(Object.getPrototypeOf(a.clients)).toBe(Object.prototype);
    expect(a.clients['x']!.client_name).toBe('Zeile\n}\n"grants":{ ü 𝄞');
    // A damaged file is refused with JSON.parse's own message.
    await writeFile(lines, (await readFile(lines, 'utf8')).replace('"client_name":"proto"', '"client_name":proto'));
    await expect(readStateFile(lines)).rejects.toThrow(SyntaxError);
  });

  it('a state of several megabytes reads the same in pieces: entries across piece and read boundaries, one longer than a piece, characters of 2 to 4 bytes at every offset', async () => {
    const dir = await scratchDir();
    const state = emptyState();
    // Names of every length from 0 to 199 chars shift the multi-byte characters across the pieces' boundaries.
    for (let i = 0; i < 12_000; i++) {
      state.clients[`client_${i}`] = {
        client_id: `client_${i}`,
        client_id_issued_at: i,
        client_name: `${'äß€𝄞x'.repeat(40).slice(0, i % 200)}#${i}`,
        redirect_uris: ['http://127.0.0.1/cb'],
        grant_types: ['authorization_code'],
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
      };
    }
    (state.shared_knowledge as Record<string, unknown>)['gross'] = { id: 'gross', text: 'Ä'.repeat(300_000) };
    // The charges stay on one line of the file: longer than several pieces.
    for (let i = 0; i < 5_000; i++) state.charges.by_client[`client_${i}`] = i / 10;
    const lines = join(dir, 'lines.json');
    const compact = join(dir, 'compact.json');
    await writeFile(lines, [...stateChunks(state, 3)].join(''));
    await writeFile(compact, `${JSON.stringify({ ...state, journal_seq: 3 })}\n`);
    expect((await readFile(lines)).length).toBeGreaterThan(3 << 20);
    // By entries alone: readStateFile would hide a failure by reading the file whole.
    const a = await readStateFileByEntries(lines);
    expect(JSON.stringify(a)).toBe(JSON.stringify(await readStateFile(compact)));
    expect(Object.keys((a as typeof state).clients)).toHaveLength(12_000);
  });

  it('what JSON.parse refuses, reading by entries refuses too, wherever the pieces end: a comma with no entry after it, two commas, a missing comma, a comma before the first entry, a value with a comma of its own, a key with a bad escape or a raw tab', async () => {
    const dir = await scratchDir();
    const head = '{"version":1,"clients":{\n';
    const bad = [
      (pad: string) => `${head}"a":"${pad}"\n,\n}\n,"journal_seq":1}\n`,
      (pad: string) => `${head}"a":"${pad}"\n,\n,"b":1\n}\n,"journal_seq":1}\n`,
      (pad: string) => `${head}"a":"${pad}"\n"b":1\n}\n,"journal_seq":1}\n`,
      (pad: string) => `${head},"a":"${pad}"\n}\n,"journal_seq":1}\n`,
      (pad: string) => `${head}"a":"${pad}"\n,"b":1,2\n}\n,"journal_seq":1}\n`,
      (pad: string) => `${head}"a":"${pad}"\n,"b\\q":1\n}\n,"journal_seq":1}\n`,
      (pad: string) => `${head}"a":"${pad}"\n,"b\t":1\n}\n,"journal_seq":1}\n`,
      // A value left open on one line and closed on the next, and a line with a value too many to make up the count.
      (pad: string) => `${head}"a":{"x":[{"p":"${pad}"}\n,"b":{}]}\n,"c":{},{}\n}\n,"journal_seq":1}\n`,
      (pad: string) => `${head}"a":"${pad}\n,"b":q"\n,"c":3,4\n}\n,"journal_seq":1}\n`,
    ];
    const file = join(dir, 'state.json');
    // Every alignment of the line breaks against the 32 KiB and 64 KiB piece ends.
    for (const around of [32 << 10, 64 << 10])
      for (let n = around - head.length - 12; n <= around - head.length + 4; n++)
        for (const make of bad) {
          const text = make('x'.repeat(n));
          expect(() => JSON.parse(text)).toThrow();
          await writeFile(file, text);
          await expect(readStateFileByEntries(file), `${n}: ${make.toString()}`).rejects.toThrow();
        }
  });
});

describe('reading a state file by entries', () => {
  // A start checks the file's UTF-8 a read at a time, carrying a sequence a read's end cut into the next check.
  it('RFC 3629: bytes cut where wholeSequencesEnd says are UTF-8 exactly when both parts are, for any bytes and any cut; text is never cut inside a character', () => {
    const cutAnywhere = (bytes: Uint8Array, at: number) => {
      const cut = Math.min(at, bytes.length);
      const whole = wholeSequencesEnd(bytes, cut);
      expect(whole).toBeLessThanOrEqual(cut);
      expect(whole).toBeGreaterThanOrEqual(cut - 3);
      return whole;
    };
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 40 }), fc.nat(200), (text, at) => {
        const bytes = Buffer.from(text, 'utf8');
        const whole = cutAnywhere(bytes, at);
        expect(isUtf8(bytes.subarray(0, whole)) && isUtf8(bytes.subarray(whole))).toBe(true);
      }),
      { numRuns: 1000 },
    );
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 12 }), fc.nat(12), (bytes, at) => {
        const whole = cutAnywhere(bytes, at);
        expect(isUtf8(bytes.subarray(0, whole)) && isUtf8(bytes.subarray(whole))).toBe(isUtf8(bytes));
      }),
      { numRuns: 2000 },
    );
  });

  it('reads what JSON.parse reads, as JSON.parse reads it: keys escaped, "__proto__", a key given twice, integer-like keys, a space after a key, an entry over two lines, an empty table', async () => {
    const file = join(await scratchDir(), 'state.json');
    const text = [
      // Entries one a line, as written: read line by line.
      '{"version":1,"clients":{',
      '"a\\u0062":{"n":1}',
      ',"__proto__":{"n":2}',
      ',"a":{"n":3}',
      ',"ab":{"n":4}',
      ',"7":{"n":5}',
      ',"e":"\\"quoted\\" \\\\ ä€𝄞"',
      ',"f":null',
      ',"ä\\"x":{"n":"ü"}',
      // A layout of a hand edit: its table is parsed as an object.
      '},"grants":{',
      '"c" :{"n":5,"ü":"Grüße €𝄞"}',
      ',"d":{"n":',
      '6}',
      '},"codes":{}',
      ',"families":{',
      '}',
      ',"note":"Grüße €𝄞","journal_seq":1}',
      '',
    ].join('\n');
    await writeFile(file, text);
    const expected = JSON.parse(text) as Record<string, Record<string, unknown>>;
    const read = (await readStateFileByEntries(file)) as typeof expected;
    expect(JSON.stringify(read)).toBe(JSON.stringify(expected));
    expect(Object.getPrototypeOf(read['clients']!)).toBe(Object.prototype);
    expect(Object.keys(read['clients']!)).toEqual(['7', 'ab', '__proto__', 'a', 'e', 'f', 'ä"x']);
    expect(Object.keys(read['grants']!)).toEqual(['c', 'd']);
  });
});

describe('a commit that could not be written', () => {
  it('41.8: fails its requests and nothing of it is written later (its changes are rolled back), and a state file begun right after it is not written', async () => {
    const file = join(await scratchDir(), 'state.json');
    const { core } = await open(file);
    const client = (n: number) => ({
      client_id: `client_${n}`,
      client_id_issued_at: 1,
      client_name: `C${n}`,
      redirect_uris: ['http://127.0.0.1/cb'],
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none' as const,
    });
    // The journal cannot be opened (a directory stands in its place): the next append fails.
    expect(existsSync(journalOf(file))).toBe(false);
    const { mkdir, rmdir } = await import('node:fs/promises');
    await mkdir(journalOf(file));
    core.repo.put('clients', 'client_1', client(1));
    // A snapshot asks for a state file at the very record that fails.
    await expect(core.exportStored()).rejects.toThrow(/cannot write state file/);
    await rmdir(journalOf(file));
    core.repo.put('clients', 'client_2', client(2));
    await core.commit();
    const stored = await readStateAt(file);
    // A server error changes nothing: the client of the failed commit is gone from memory too.
    expect(core.state.clients.client_1).toBeUndefined();
    expect(Object.keys(stored!.clients).sort()).toEqual(['client_2']);
    expect(JSON.stringify(stored)).toBe(JSON.stringify(core.state));
  });
});

describe('a first start that was killed', () => {
  it('a state that exists only as a journal (killed before its state file was written) is replayed onto an empty state, and gets its state file at open', async () => {
    const file = join(await scratchDir(), 'state.json');
    // Record 1 of a new state holds all of it: here a signing key and a client, as a first start writes them.
    const repo = new Repository(emptyState());
    repo.addSigningKey(await generateSigningKey(T0));
    repo.put('clients', 'client_a', {
      client_id: 'client_a',
      client_id_issued_at: 1,
      client_name: 'A',
      redirect_uris: ['http://127.0.0.1/cb'],
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    });
    await writeFile(journalOf(file), journalLine({ seq: 1, changes: repo.drain().changes }), { mode: 0o600 });
    const { core, persistence, notices } = await open(file);
    expect(JSON.stringify(core.state)).toBe(JSON.stringify(repo.state));
    expect(notices).toEqual([
      `replayed 1 journal record from ${journalOf(file)} onto an empty state: the first start on ${file} stopped before it wrote the state file`,
    ]);
    expect(JSON.parse(await readFile(file, 'utf8'))).toMatchObject({ clients: { client_a: { client_name: 'A' } }, journal_seq: 1 });
    await persistence.close();
  });
});

describe('compaction: the journal is folded into the state file in the background', () => {
  it('past the limit the state file is rewritten whole and the journal keeps only newer records; commits go on meanwhile and every one survives a restart', async () => {
    const file = join(await scratchDir(), 'state.json');
    const { core } = await open(file, { journalLimit: 16 * 1024 });
    const tokens = await agentTokens(core);
    const baseBefore = (await readFile(file, 'utf8')).length;
    let refreshToken = tokens.refresh_token!;
    // Rotations in parallel with grants: several compactions happen while commits are appended.
    for (let i = 0; i < 60; i++) {
      const [rotated] = await Promise.all([rotate(core, tokens.client_id, refreshToken), agentTokens(core), agentTokens(core)]);
      refreshToken = rotated.refresh_token!;
    }
    await core.persistence.flush();
    const base = JSON.parse(await readFile(file, 'utf8')) as { journal_seq: number };
    expect(JSON.stringify(base).length).toBeGreaterThan(baseBefore);
    expect(base.journal_seq).toBeGreaterThan(1);
    // Past both the limit and the state file's size a commit starts a compaction, which flush waits for.
    expect((await stat(journalOf(file)).catch(() => ({ size: 0 }))).size).toBeLessThan(Math.max(16 * 1024, (await stat(file)).size));
    expect(JSON.stringify(await readStateAt(file))).toBe(JSON.stringify(core.state));
    const again = await open(file);
    expect(JSON.stringify(again.core.state)).toBe(JSON.stringify(core.state));
    expect((await rotate(again.core, tokens.client_id, refreshToken)).access_token).toBeTruthy();
    await again.persistence.close();
  });

  it("a journal past the limit is folded only once it passes the state file's size too, not at half of it", async () => {
    const file = join(await scratchDir(), 'state.json');
    // No compaction for the journal's age while the test runs.
    const { core, persistence } = await open(file, { journalLimit: 1024, journalMaxAgeMs: 3_600_000 });
    const tokens = await agentTokens(core);
    // A state file many times the limit.
    for (let i = 0; i < 30; i++) await agentTokens(core);
    await persistence.flush();
    let refreshToken = tokens.refresh_token!;
    const size = async (f: string) => (await stat(f).catch(() => ({ size: 0 }))).size;
    const seqOf = async () => (JSON.parse(await readFile(file, 'utf8')) as { journal_seq: number }).journal_seq;
    let stateBytes = await size(file);
    let seq = await seqOf();
    let largestUnfolded = 0;
    let compactions = 0;
    for (let i = 0; i < 5000 && compactions < 2; i++) {
      refreshToken = (await rotate(core, tokens.client_id, refreshToken)).refresh_token!;
      // flush waits for a compaction the commit started.
      await persistence.flush();
      const now = await seqOf();
      if (now !== seq) {
        compactions++;
        seq = now;
        stateBytes = await size(file);
        continue;
      }
      const journalBytes = await size(journalOf(file));
      expect(journalBytes).toBeLessThan(stateBytes);
      largestUnfolded = Math.max(largestUnfolded, journalBytes / stateBytes);
    }
    expect(compactions).toBe(2);
    expect(stateBytes).toBeGreaterThan(16 * 1024);
    // Far past the 1 KiB limit and past half the state file, still not folded.
    expect(largestUnfolded).toBeGreaterThan(0.9);
    await persistence.close();
  });
});

describe("succeeded research jobs' reports stay in the state file", () => {
  const job = (id: string, status: ResearchJob['status'], text: string): ResearchJob => ({
    id,
    client_id: 'client_a',
    grant_id: 'grant_a',
    person_id: 'person_erika',
    question: `Frage ${text}?`,
    status,
    created_at: T0,
    queued_until: T0,
    running_until: T0,
    ...(status === 'succeeded'
      ? {
          finished_at: T0,
          report: `# Bericht ${text}\n\n"Zitat" [1] \\ ${text.repeat(3)}`,
          citations: [{ id: 'kb-1', title: `Titel ${text}`, file_name: 'faq.md', snippet: `»${text}«` }],
        }
      : {}),
    ...(status === 'failed' ? { finished_at: T0, error: { code: 'no_sources', message: `keine ${text}` } } : {}),
  });
  const asJson = (value: unknown) => JSON.parse(JSON.stringify(value)) as unknown;

  it('a start reads a succeeded job cold, its report read from its place in the file: characters of 2 to 4 bytes before and in it, odd ids; others are held whole', async () => {
    const dir = await scratchDir();
    const state = emptyState();
    // Multi-byte characters in the tables before and between the jobs shift every job's byte offset from its char offset.
    state.shared_knowledge['k'] = { id: 'k', text: 'ä€𝄞'.repeat(5000) } as never;
    const ids = ['job_1', 'job "quoted"\\', 'job_ü€𝄞', '__proto__', 'job_queued', 'job_failed', 'job_last'];
    for (const [i, id] of ids.entries()) {
      const status = id === 'job_queued' ? 'queued' : id === 'job_failed' ? 'failed' : 'succeeded';
      setOwn(state.research_jobs, id, job(id, status, `${'ä€𝄞x'.slice(0, i)}${i}`));
    }
    const file = join(dir, 'state.json');
    await writeFile(file, [...stateChunks(state, 2)].join(''));
    const source = new BodySource(file);
    try {
      const read = (await readStateFileByEntries(file, source)) as typeof state;
      const jobs = read.research_jobs;
      expect(Object.keys(jobs)).toEqual(ids);
      for (const id of ids) {
        expect(locationOf(jobs[id]) !== undefined, id).toBe(state.research_jobs[id]!.status === 'succeeded');
        expect(jobs[id]!.report).toBe(state.research_jobs[id]!.report);
        expect(jobs[id]!.citations).toEqual(state.research_jobs[id]!.citations);
        // A cold job is frozen as it is made (its getters must not be walked to freeze it); whole ones by the repository.
        if (locationOf(jobs[id])) expect(Object.isFrozen(jobs[id])).toBe(true);
      }
      expect(asJson(read)).toEqual(asJson({ ...state, journal_seq: 2 }));
      // A key escaped by hand is read as JSON reads it; the job's place in the file is still its line's.
      await writeFile(file, (await readFile(file, 'utf8')).replace('"job_last":', '"job\\u005flast":'));
      const other = new BodySource(file);
      try {
        const edited = (await readStateFileByEntries(file, other)) as typeof state;
        expect(Object.keys(edited.research_jobs)).toEqual(ids);
        expect(locationOf(edited.research_jobs['job_last'])).toBeDefined();
        expect(edited.research_jobs['job_last']!.report).toBe(state.research_jobs['job_last']!.report);
      } finally {
        other.close();
      }
      // A job given twice (a hand edit): as in JSON, the second value at the first one's place in the key order,
      // its report read from the second line.
      const text = await readFile(file, 'utf8');
      const line = text.split('\n').find((l) => l.startsWith('"job_1":'))!;
      await writeFile(file, text.replace('\n,"job_queued"', `\n,${line.replace('# Bericht', '# Zweiter Bericht')}\n,"job_queued"`));
      const twice = new BodySource(file);
      try {
        const doubled = (await readStateFileByEntries(file, twice)) as typeof state;
        expect(Object.keys(doubled.research_jobs)).toEqual(ids);
        expect(doubled.research_jobs['job_1']!.report).toMatch(/^# Zweiter Bericht/);
        expect(asJson(doubled)).toEqual(JSON.parse(await readFile(file, 'utf8')));
      } finally {
        twice.close();
      }
    } finally {
      source.close();
    }
  });

  it('a start that parses a succeeded job only up to its report accepts exactly what JSON.parse accepts, and reads what it accepts as JSON.parse does', async () => {
    const dir = await scratchDir();
    const state = emptyState();
    for (const id of ['job_a', 'job_b', 'job_c']) setOwn(state.research_jobs, id, job(id, 'succeeded', `ä${id}`));
    const file = join(dir, 'state.json');
    const written = [...stateChunks(state, 1)].join('');
    const lineOf = (id: string) => written.split('\n').find((l) => l.includes(`"${id}":{`))!;
    const edit = (id: string, change: (line: string) => string) => written.replace(lineOf(id), change(lineOf(id)));
    const refused = {
      'a raw control character in a report': edit('job_b', (l) => l.replace('\\n\\n', '\t')),
      'an escape JSON has not in a report': edit('job_b', (l) => l.replace('\\n\\n', '\\q')),
      'a short \\u escape in a citation': edit('job_b', (l) => l.replace('»', '\\u00b')),
      'no field before the report': edit('job_b', (l) => l.replace(/\{.*?,"report"/, '{,"report"')),
      'two commas before the report': edit('job_b', (l) => l.replace(',"report"', ',,"report"')),
      'a string left open before the report': edit('job_b', (l) => l.replace(/"finished_at":\d+/, '"finished_at":"1')),
      'a comma after the last citation': edit('job_b', (l) => l.replace(/\]\}$/, ',]}')),
      'no comma between two jobs': written.replace('\n,"job_c"', '\n"job_c"'),
      // A job's entry left open, closed on the next line, and a value too many after it.
      'a job left open and closed on the next line': edit(
        'job_b',
        () =>
          '"job_b":{"id":"job_b","status":"succeeded","x":{"y":1,"report":"r","citations":[]}\n,"job_x":"status":"succeeded"}\n,"job_y":1,2',
      ),
      'a citation that is not an object': edit('job_b', (l) => l.replace('"citations":[', '"citations":["x":1,')),
    };
    const accepted = {
      'a field after the citations': edit('job_b', (l) => l.replace(/\]\}$/, '],"extra":1}')),
      'a citation with a number in it': edit('job_b', (l) => l.replace('"file_name":"faq.md"', '"file_name":7')),
      'a space after the colon': edit('job_b', (l) => l.replace('"report":"', '"report": "')),
      'a space after the entry': edit('job_b', (l) => `${l} `),
      'an escaped umlaut in a report': edit('job_b', (l) => l.replace('ä', '\\u00e4')),
      'a report given twice': edit('job_b', (l) => l.replace('"finished_at"', '"report":"first","finished_at"')),
      'a report not succeeded': edit('job_b', (l) => l.replace('"succeeded"', '"running"')),
      'a report and citations in a field before them': edit('job_b', (l) =>
        l.replace('"finished_at"', '"meta":{"n":1,"report":"r","citations":[]},"finished_at"'),
      ),
    };
    /** What a start reads, and the file its cold jobs read from (the caller closes it). */
    const start = async (text: string) => {
      await writeFile(file, text);
      const source = new BodySource(file);
      try {
        return { jobs: ((await readStateFileByEntries(file, source)) as typeof state).research_jobs, source };
      } catch (e) {
        source.close();
        throw e;
      }
    };
    const coldIds = (jobs: typeof state.research_jobs) => Object.keys(jobs).filter((id) => locationOf(jobs[id]) !== undefined);
    const first = await start(written);
    first.source.close();
    expect(coldIds(first.jobs)).toEqual(['job_a', 'job_b', 'job_c']);
    for (const [what, text] of Object.entries(refused)) {
      expect(() => JSON.parse(text), what).toThrow();
      // Refused by the start itself, not only when the job is polled.
      await expect(start(text), what).rejects.toThrow();
    }
    for (const [what, text] of Object.entries(accepted)) {
      const { jobs, source } = await start(text);
      try {
        expect(asJson(jobs), what).toEqual((JSON.parse(text) as typeof state).research_jobs);
      } finally {
        source.close();
      }
      // Only a line as the core writes it is left in the file.
      expect(coldIds(jobs).includes('job_b'), what).toBe(what === 'an escaped umlaut in a report');
    }
  });

  it('a state of several megabytes: jobs across piece and read boundaries, characters of 2 to 4 bytes at every offset (and across the ends of reads), all read back from their places; bytes that are not UTF-8 read as JSON.parse reads them, every job whole', async () => {
    const dir = await scratchDir();
    const state = emptyState();
    for (let i = 0; i < 3000; i++) {
      const id = `job_${i}`;
      const text = `${'äß€𝄞x'.repeat(60).slice(0, i % 300)}#${i}`;
      state.research_jobs[id] = job(id, i % 7 === 6 ? 'queued' : 'succeeded', text);
    }
    const file = join(dir, 'state.json');
    await writeFile(file, [...stateChunks(state, 1)].join(''));
    expect((await stat(file)).size).toBeGreaterThan(3 << 20);
    const source = new BodySource(file);
    try {
      const jobs = ((await readStateFileByEntries(file, source)) as typeof state).research_jobs;
      let coldJobs = 0;
      for (const [id, expected] of Object.entries(state.research_jobs)) {
        if (locationOf(jobs[id])) coldJobs++;
        expect(asJson(jobs[id]), id).toEqual(asJson(expected));
      }
      expect(coldJobs).toBe(Object.values(state.research_jobs).filter((j) => j.status === 'succeeded').length);
    } finally {
      source.close();
    }
    // Bytes that are not UTF-8 (a hand edit), in a table before the jobs and in a job's report: each reads as U+FFFD,
    // as in JSON.parse of the file's text, and every job is held whole, so that the next compaction writes UTF-8 again
    // (a cold job's entry would be copied as it is).
    const bytes = Buffer.from([...stateChunks({ ...state, clients: { c: { client_name: 'Ä' } as never } }, 1)].join(''));
    bytes[bytes.indexOf(Buffer.from('Ä'))] = 0xff;
    const report = bytes.indexOf(Buffer.from('# Bericht ä'), bytes.indexOf(Buffer.from('"job_299":')));
    bytes[report + '# Bericht '.length] = 0xf0; // "ä" (2 bytes) now starts as a 4-byte sequence: not UTF-8
    await writeFile(file, bytes);
    const damaged = new BodySource(file);
    try {
      const read = (await readStateFile(file, damaged)) as typeof state;
      const expected = JSON.parse(bytes.toString('utf8')) as typeof state;
      expect(read.clients['c']!.client_name).toBe('\ufffd\ufffd');
      expect(read.research_jobs['job_299']!.report).toMatch(/^# Bericht \ufffd/);
      expect(Object.values(read.research_jobs).some((j) => locationOf(j))).toBe(false);
      expect(asJson(read)).toEqual(asJson(expected));
    } finally {
      damaged.close();
    }
  });

  it('a compaction copies cold jobs byte for byte from the file before and holds every succeeded job cold in the new one; a job replaced meanwhile is left alone', async () => {
    const file = join(await scratchDir(), 'state.json');
    const first = await open(file);
    // More cold entries than one chunk to the writer carries (1 024).
    for (let i = 0; i < 1500; i++)
      first.core.repo.put('research_jobs', `job_${i}`, job(`job_${i}`, i % 10 === 9 ? 'failed' : 'succeeded', `ü${i}€`));
    await first.core.commit();
    await first.persistence.close();

    const { core, persistence } = await open(file);
    const cold = (id: string) => locationOf(core.repo.get('research_jobs', id));
    expect(cold('job_0')).toBeDefined();
    expect(cold('job_9')).toBeUndefined();
    const expected = () => asJson(core.state);
    // New jobs (whole), one removed, one finished again by a retry of the scenario: what the next state file must hold.
    for (let i = 1500; i < 1510; i++) core.repo.put('research_jobs', `job_${i}`, job(`job_${i}`, 'succeeded', `neu ${i} 𝄞`));
    core.repo.delete('research_jobs', 'job_3');
    core.repo.put('research_jobs', 'job_5', job('job_5', 'succeeded', 'wieder'));
    const before = expected();
    // The writer copies the cold entries: nothing reads a report back.
    const reads = vi.spyOn(BodySource.prototype, 'body');
    const stored = await persistence.readStored(core.repo);
    expect(reads).not.toHaveBeenCalled();
    reads.mockRestore();
    expect(JSON.parse(stored.state)).toEqual({ ...(before as object), journal_seq: expect.any(Number) });
    for (const id of ['job_0', 'job_5', 'job_1505']) expect(cold(id), id).toBeDefined();
    expect(expected()).toEqual(before);
    // A job changed after the snapshot was taken and before the new file was in place stays as it is now.
    const third = persistence.readStored(core.repo);
    await new Promise((resolve) => setImmediate(resolve));
    core.repo.put('research_jobs', 'job_7', job('job_7', 'succeeded', 'geändert'));
    const storedBefore = JSON.parse((await third).state) as { research_jobs: Record<string, ResearchJob> };
    expect(storedBefore.research_jobs['job_7']!.report).toBe(job('job_7', 'succeeded', 'ü7€').report);
    expect(cold('job_7')).toBeUndefined();
    expect(core.repo.get('research_jobs', 'job_7')!.report).toBe(job('job_7', 'succeeded', 'geändert').report);
    // Once more: the first file is closed by now, the jobs read from the newest one.
    core.repo.put('research_jobs', 'job_1510', job('job_1510', 'succeeded', 'spät'));
    await persistence.readStored(core.repo);
    expect(cold('job_1510')).toBeDefined();
    expect(cold('job_7')).toBeDefined();
    expect(core.repo.get('research_jobs', 'job_7')!.report).toBe(job('job_7', 'succeeded', 'geändert').report);
    const atRest = asJson(core.state);
    await persistence.close();
    expect(JSON.parse(await readFile(file, 'utf8'))).toEqual({ ...(atRest as object), journal_seq: expect.any(Number) });
    const again = await open(file);
    expect(asJson(again.core.state)).toEqual(atRest);
    await again.persistence.close();
  });

  it('a cold job changed through the repository becomes a whole job again, and the journal carries all of it', async () => {
    const file = join(await scratchDir(), 'state.json');
    const first = await open(file);
    first.core.repo.put('research_jobs', 'job_1', job('job_1', 'succeeded', 'alt'));
    await first.core.commit();
    await first.persistence.close();
    const { core } = await open(file);
    expect(locationOf(core.repo.get('research_jobs', 'job_1'))).toBeDefined();
    const changed = core.repo.update('research_jobs', 'job_1', { question: 'Neue Frage?' });
    expect(locationOf(changed)).toBeUndefined();
    await core.commit();
    const last = (await records(file)).at(-1)!;
    expect(last.changes).toEqual([[['research_jobs', 'job_1'], asJson({ ...job('job_1', 'succeeded', 'alt'), question: 'Neue Frage?' })]]);
    // Not closed: the next start replays the journal over the state file.
    const again = await open(file);
    expect(again.core.repo.get('research_jobs', 'job_1')!.question).toBe('Neue Frage?');
    expect(again.core.repo.get('research_jobs', 'job_1')!.report).toBe(job('job_1', 'succeeded', 'alt').report);
    await again.persistence.close();
  });
});
