/**
 * How the state file stays current (docs/serve.md "How the state is stored"): a commit appends one journal record with
 * what changed; a start replays it; past a size the state is folded back into the state file. Real files in temp
 * dirs, the real writer, the core in-process on a manual clock.
 */
import { existsSync } from 'node:fs';
import { appendFile, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../src/core/state/clock.js';
import { Core } from '../src/core/core.js';
import { StateFileError } from '../src/core/state/errors.js';
import { issueTokensWithoutConsent } from '../src/core/oauth/issue-tokens.js';
import { exchangeToken } from '../src/core/oauth/token-endpoint.js';
import { FilePersistence, readStateAt, type FilePersistenceOptions } from '../src/store/file-persistence.js';
import { stateChunks } from '../src/store/state-text.js';
import { loadFixtures } from '../src/loaders/fixtures.js';
import { generateSigningKey } from '../src/core/oauth/keys.js';
import { Repository } from '../src/core/state/repository.js';
import type { ResearchJob } from '../src/core/resources/jobs.js';
import { emptyState } from '../src/core/state/state.js';
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

/** A registered public client, as the state holds one. */
const clientRecord = (id: string, name: string) => ({
  client_id: id,
  client_id_issued_at: 1,
  client_name: name,
  redirect_uris: ['http://127.0.0.1/cb'],
  grant_types: ['authorization_code'],
  response_types: ['code'],
  token_endpoint_auth_method: 'none' as const,
});
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

describe('the state file: one JSON document, an entry a line', () => {
  it('stateChunks writes what JSON.stringify writes, with a line break before each entry: odd keys and strings included; a start reads it and an older compact file alike', async () => {
    const dir = await scratchDir();
    const state = emptyState();
    Object.defineProperty(state.clients, '__proto__', {
      value: clientRecord('__proto__', 'proto'),
      enumerable: true,
      writable: true,
      configurable: true,
    });
    state.clients['x'] = clientRecord('x', 'Zeile\n}\n"grants":{ ü 𝄞');
    const text = [...stateChunks(state, 7)].join('');
    expect(text.split('\n').length).toBeGreaterThan(4);
    expect(text).toContain('\n,"x":');
    const read = JSON.parse(text) as typeof state & { journal_seq: number };
    expect(read.journal_seq).toBe(7);
    expect(JSON.stringify({ ...read, journal_seq: undefined })).toBe(JSON.stringify(state));
    expect(Object.keys(read.clients)).toEqual(['__proto__', 'x']);
    expect(Object.getPrototypeOf(read.clients)).toBe(Object.prototype);
    const lines = join(dir, 'lines.json');
    const compact = join(dir, 'compact.json');
    await writeFile(lines, text);
    await writeFile(compact, `${JSON.stringify({ ...state, journal_seq: 7 })}\n`);
    expect(JSON.stringify(await readStateAt(lines))).toBe(JSON.stringify(await readStateAt(compact)));
    // A damaged file is refused with JSON.parse's own message, naming the file.
    await writeFile(lines, text.replace('"client_name":"proto"', '"client_name":proto'));
    await expect(readStateAt(lines)).rejects.toThrow(/lines\.json/);
  });
});

describe('a commit that could not be written', () => {
  it('41.8: fails its requests and nothing of it is written later (its changes are rolled back), and a state file begun right after it is not written', async () => {
    const file = join(await scratchDir(), 'state.json');
    const { core } = await open(file);
    // The journal cannot be opened (a directory stands in its place): the next append fails.
    expect(existsSync(journalOf(file))).toBe(false);
    const { mkdir, rmdir } = await import('node:fs/promises');
    await mkdir(journalOf(file));
    core.repo.put('clients', 'client_1', clientRecord('client_1', 'C1'));
    // A snapshot asks for a state file at the very record that fails.
    await expect(core.exportState()).rejects.toThrow(/cannot write state file/);
    await rmdir(journalOf(file));
    core.repo.put('clients', 'client_2', clientRecord('client_2', 'C2'));
    await core.commit();
    const stored = await readStateAt(file);
    // A server error changes nothing: the client of the failed commit is gone from memory too.
    expect(core.state.clients.client_1).toBeUndefined();
    expect(Object.keys(stored!.clients).sort()).toEqual(['client_2']);
    expect(JSON.stringify(stored)).toBe(JSON.stringify(core.state));
  });
});

describe('a persistence that stopped acknowledging (its lock lost, its files gone)', () => {
  it('an export asked for afterwards fails with the cause at once, and close ends, instead of waiting for a record that never comes', async () => {
    const file = join(await scratchDir(), 'state.json');
    const { core, persistence } = await open(file);
    persistence.abandon(new Error("the lock is no longer this process's"));
    await expect(core.exportState()).rejects.toThrow(/lock is no longer/);
    await persistence.close();
  });
});

describe('a first start that was killed', () => {
  it('a state that exists only as a journal (killed before its state file was written) is replayed onto an empty state, and gets its state file at open', async () => {
    const file = join(await scratchDir(), 'state.json');
    // Record 1 of a new state holds all of it: here a signing key and a client, as a first start writes them.
    const repo = new Repository(emptyState());
    repo.addSigningKey(await generateSigningKey(T0));
    repo.put('clients', 'client_a', clientRecord('client_a', 'A'));
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

  it('a state of several MiB is written whole: entries that cross the write buffer, one longer than it, characters of 2 to 4 bytes', async () => {
    const file = join(await scratchDir(), 'state.json');
    const { core, persistence } = await open(file);
    // Names of every length from 0 to 199 shift the multi-byte characters across the buffer's ends.
    for (let i = 0; i < 12_000; i++)
      core.repo.put('clients', `client_${i}`, clientRecord(`client_${i}`, `${'äß€𝄞x'.repeat(40).slice(0, i % 200)}#${i}`));
    // Longer than the buffer (1 MiB) even as UTF-16 code units, at 3 bytes each in UTF-8.
    core.repo.put('clients', 'long', clientRecord('long', '€'.repeat(400_000)));
    await core.commit();
    await core.exportState();
    expect((await stat(file)).size).toBeGreaterThan(3 << 20);
    expect(JSON.stringify(await readStateAt(file))).toBe(JSON.stringify(core.state));
    await persistence.close();
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

describe('succeeded research jobs are plain data in the state', () => {
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

  it('46.3: a succeeded job read at a start is plain data: its report and citations are data properties, so a spread reads no disk; a compaction and a restart keep it exact', async () => {
    const file = join(await scratchDir(), 'state.json');
    const first = await open(file);
    const written = job('job_ä', 'succeeded', 'Hufschmied 🐴 Ä');
    first.core.repo.put('research_jobs', 'job_ä', written);
    first.core.repo.put('research_jobs', 'job_q', job('job_q', 'queued', 'wartet'));
    await first.core.commit();
    await first.persistence.close();
    for (let round = 0; round < 2; round++) {
      const { core, persistence } = await open(file);
      const read = core.repo.get('research_jobs', 'job_ä')!;
      for (const field of ['report', 'citations'] as const) expect(Object.getOwnPropertyDescriptor(read, field)).toHaveProperty('value');
      expect(asJson({ ...read })).toEqual(asJson(written));
      expect(asJson(core.repo.get('research_jobs', 'job_q'))).toEqual(asJson(job('job_q', 'queued', 'wartet')));
      // A compaction writes it from memory as it is.
      await core.exportState();
      await persistence.close();
    }
  });
});
