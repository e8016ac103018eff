/**
 * A real `serve` under disk and file faults (issue 41, section B): its answers must match what it stored. Faults
 * are injected at the file layer (test/helpers/fs-faults.cjs, loaded with `node --require` into serve): a rename that
 * fails as onto an immutable file, a write that fails as on a full disk. They need no root and no special file
 * system; they are armed and cleared while serve runs.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, rmdirSync } from 'node:fs';
import { link, mkdir, readFile, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import lockfile from 'proper-lockfile';
import { describe, expect, it, vi } from 'vitest';
import { journalFileFor } from '../src/store/state-files.js';
import { Repository } from '../src/core/state/repository.js';
import { authenticate } from '../src/core/oauth/resource-guard.js';
import { emptyState } from '../src/core/state/state.js';
import { FilePersistence, readStateAt } from '../src/store/file-persistence.js';
import { lockStateFile } from '../src/store/lock.js';
import { runCli, startServe, type ServeProcess } from './helpers/cli.js';
import { scratchDir, startEmulator } from './helpers/emulator.js';
import { bearer, postJson } from './helpers/oauth.js';
import { pollUntil } from './helpers/wait.js';

const FS_FAULTS = fileURLToPath(new URL('./helpers/fs-faults.cjs', import.meta.url));

interface FaultRules {
  write?: { code: string; name: string };
  rename?: { code: string; name: string };
}

/** A serve on `dir/state.json` whose file operations fail as `arm` says, from the next one on. */
async function serveWithFaults(
  dir: string,
  args: string[] = [],
): Promise<{ serve: ServeProcess; file: string; arm: (rules: FaultRules) => Promise<void> }> {
  const control = join(dir, 'faults.json');
  // Whole or not at all: serve reads it at every file operation.
  const arm = async (rules: FaultRules) => {
    await writeFile(`${control}.new`, JSON.stringify(rules));
    await rename(`${control}.new`, control);
  };
  await arm({});
  const file = join(dir, 'state.json');
  const serve = await startServe(['--state', file, '--clock', 'manual', ...args], {
    nodeArgs: ['--require', FS_FAULTS],
    env: { AGENT_ACCESS_TEST_FS_FAULTS: control },
  });
  return { serve, file, arm };
}

const tokens = async (serve: ServeProcess, scopes = ['ask']) => {
  const res = await postJson(`${serve.ready.admin_url}/tokens`, { scopes }, bearer(serve.ready.admin_token));
  return { status: res.status, body: res.json() as { access_token: string; client_id: string } };
};

describe('a compaction that fails (issue 41.7)', () => {
  it('41.7: a state file that cannot be renamed into place is said with its cause and tried again, serve keeps answering from the journal, and a clean stop exits 0 keeping every answered write', async () => {
    const dir = await scratchDir();
    // A compaction once the journal passes the state file's size (a few KB).
    const { serve, file, arm } = await serveWithFaults(dir, ['--journal-limit', '1kb']);
    // As `chattr +i state.json` does: every rename onto it fails.
    await arm({ rename: { code: 'EPERM', name: '^state\\.json$' } });
    const clients: string[] = [];
    await pollUntil(
      async () => {
        const next = await tokens(serve);
        expect(next.status).toBe(200);
        clients.push(next.body.client_id);
        return /compaction failed: .*EPERM/.test(serve.stderr());
      },
      'the failed compaction on stderr',
      { describe: serve.stderr },
    );
    expect(serve.stderr()).toMatch(/every answered write is in .*state\.journal\.jsonl .*serving goes on, next try in \d+ s/);
    // Tried again after its backoff, and failing again; meanwhile every write is answered.
    await pollUntil(
      async () => {
        const next = await tokens(serve);
        expect(next.status).toBe(200);
        clients.push(next.body.client_id);
        return (serve.stderr().match(/compaction failed/g) ?? []).length >= 2;
      },
      'a second try',
      { intervalMs: 50, describe: serve.stderr },
    );
    expect(await serve.stop()).toBe(0);
    expect(serve.stderr()).toMatch(
      /stopped without folding the journal into .*state\.json \(.*EPERM.*\); every answered write is kept in .*state\.journal\.jsonl/,
    );
    expect(serve.stderr()).not.toMatch(/Abort|SIGABRT|uncaught/i);
    // Every answered write is on disk, in the journal, and a start replays it.
    const state = await readStateAt(file);
    for (const id of clients) expect(state?.clients[id], id).toBeDefined();

    await arm({});
    const again = await serveWithFaults(dir);
    expect((await tokens(again.serve)).status).toBe(200);
    expect(await again.serve.stop()).toBe(0);
    expect(again.serve.stderr()).not.toMatch(/compaction failed|stopped without/);
  });
});

/** `chattr +i` on `file` (root only, and a file system that has the flag); false where it cannot be done. */
function makeImmutable(file: string, on: boolean): boolean {
  if (process.getuid?.() !== 0) return false;
  try {
    execFileSync('chattr', [on ? '+i' : '-i', file], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

describe('a compaction that fails on a real immutable file (issue 41.7)', () => {
  it('41.7: with state.json made immutable (chattr +i) under load, serve keeps answering, never aborts, says why its compactions fail, and a clean stop exits 0 (needs root and chattr; skipped otherwise)', async (ctx) => {
    const dir = await scratchDir();
    const file = join(dir, 'state.json');
    const serve = await startServe(['--state', file, '--journal-limit', '1kb']);
    if (!makeImmutable(file, true)) {
      await serve.stop();
      return ctx.skip('needs root and chattr +i');
    }
    try {
      // Bounded load: 8 concurrent writers until two compactions have failed.
      await pollUntil(
        async () => {
          const answers = await Promise.all(Array.from({ length: 8 }, () => tokens(serve)));
          for (const a of answers) expect(a.status).toBe(200);
          return (serve.stderr().match(/compaction failed: .*EPERM/g) ?? []).length >= 2;
        },
        'two failed compactions',
        { intervalMs: 20, describe: serve.stderr },
      );
      expect(serve.child.exitCode).toBeNull();
      expect(await serve.stop()).toBe(0);
      expect(serve.stderr()).toMatch(/stopped without folding the journal into .*EPERM/);
    } finally {
      makeImmutable(file, false);
    }
    const again = await startServe(['--state', file]);
    expect(await again.stop()).toBe(0);
  });
});

describe('a commit that fails (issue 41.8)', () => {
  it('41.8: asks and research jobs answered 500 on a full disk change and charge nothing, then or later, and a retry with the same Idempotency-Key runs afresh', async () => {
    const dir = await scratchDir();
    const { serve, file, arm } = await serveWithFaults(dir);
    const admin = bearer(serve.ready.admin_token);
    let { body } = await tokens(serve, ['ask', 'research']);
    const call = (path: string, question: string, key: string) =>
      postJson(`${serve.ready.base_url}${path}`, { question }, bearer(body.access_token, { 'idempotency-key': key }));
    const calls = [
      ...['k1', 'k2', 'k3', 'k4'].map((key) => () => call('/chat/ask', `Wann kommt der Hufschmied? (${key})`, key)),
      ...['r1', 'r2', 'r3'].map((key) => () => call('/research', `Welche Weiden sind im Winter gesperrt? (${key})`, key)),
    ];
    // A full disk: no write to the state's files gets through.
    await arm({ write: { code: 'ENOSPC', name: '^\\.?state\\.' } });
    for (const send of calls) expect((await send()).status).toBe(500);
    await arm({});
    // Space is back, and another write commits: nothing of the failed ones comes with it.
    expect((await tokens(serve)).status).toBe(200);
    const charges = async () =>
      (
        (await (await fetch(`${serve.ready.admin_url}/charges`, { headers: admin })).json()) as {
          entries: Array<{ idempotency_key: string }>;
        }
      ).entries;
    expect(await charges()).toEqual([]);
    // On the clock, a job that had been kept would run now.
    expect((await postJson(`${serve.ready.admin_url}/clock/advance`, { by: '1h' }, admin)).status).toBe(200);
    let state = await readStateAt(file);
    expect(state?.charges.count).toBe(0);
    expect(Object.keys(state?.research_jobs ?? {})).toEqual([]);
    expect(Object.keys(state?.idempotency ?? {})).toEqual([]);

    // The same keys again (a token of the same client: the first expired on the clock) run the operations afresh:
    // each charged once, now.
    ({ body } = await postJson(`${serve.ready.admin_url}/tokens`, { scopes: ['ask', 'research'], client_id: body.client_id }, admin).then(
      (r) => ({ body: r.json() as typeof body }),
    ));
    for (const send of calls) expect([200, 202]).toContain((await send()).status);
    expect((await charges()).map((c) => c.idempotency_key).sort()).toEqual(['k1', 'k2', 'k3', 'k4', 'r1', 'r2', 'r3']);
    expect(await serve.stop()).toBe(0);
    state = await readStateAt(file);
    expect(state?.charges.count).toBe(7);
    expect(Object.keys(state?.research_jobs ?? {})).toHaveLength(3);
  });
});

/** `dir` mounted read-only at a new folder (a bind mount: needs root, and a system that allows it); null where it cannot be. */
async function readOnlyView(dir: string): Promise<{ path: string; unmount: () => void } | null> {
  if (process.getuid?.() !== 0) return null;
  const path = `${dir}-ro`;
  await mkdir(path);
  try {
    execFileSync('mount', ['--bind', dir, path], { stdio: 'ignore' });
  } catch {
    rmdirSync(path);
    return null;
  }
  const unmount = () => {
    execFileSync('umount', [path], { stdio: 'ignore' });
    rmdirSync(path);
  };
  try {
    execFileSync('mount', ['-o', 'remount,ro,bind', path], { stdio: 'ignore' });
  } catch {
    unmount();
    return null;
  }
  return { path, unmount };
}

describe('a state folder that is read-only (issue 41.11)', () => {
  it('41.11: serve on a read-only file system says the folder is read-only, at once, not that another process holds the file (needs root for a read-only bind mount; skipped otherwise)', async (ctx) => {
    const dir = await scratchDir();
    // As a killed serve leaves it: a state file, its lock and admin file.
    const serve = await startServe(['--state', join(dir, 'state.json')]);
    serve.child.kill('SIGKILL');
    await serve.exit;
    const view = await readOnlyView(dir);
    if (!view) return ctx.skip('needs root and bind mounts for a read-only file system');
    try {
      for (const state of [join(view.path, 'state.json'), join(view.path, 'new', 'state.json')]) {
        const started = Date.now();
        const { code, stderr } = await runCli(['serve', '--state', state, '--port', '0', '--auth-port', '0']);
        expect(code, stderr).toBe(3);
        expect(stderr).toContain(`the folder ${view.path} is on a read-only file system`);
        expect(stderr).not.toMatch(/another agent-access process|waiting for the lock/);
        // Not after waiting out the lock (5 s).
        expect(Date.now() - started).toBeLessThan(4_000);
      }
    } finally {
      view.unmount();
    }
  });
});

describe('state files removed under a running serve (issue 41.10)', () => {
  it('41.10: a journal removed by hand is noticed before the next write is acknowledged: that write is answered 500, serve writes every answered write from memory and stops (exit 3), and the next start has them all', async () => {
    const dir = await scratchDir();
    const file = join(dir, 'state.json');
    const serve = await startServe(['--state', file]);
    const answered: string[] = [];
    for (let i = 0; i < 5; i++) answered.push((await tokens(serve)).body.client_id);
    await rm(journalFileFor(file));
    const after = await tokens(serve);
    expect(after.status).toBe(500);
    expect(await serve.exit).toBe(3);
    expect(serve.stderr()).toContain(`the journal ${journalFileFor(file)} was removed while serve ran; stopped acknowledging writes`);
    expect(serve.stderr()).toMatch(/every write answered before is kept: .*state\.json is written from memory/);
    expect(serve.stderr()).toMatch(/wrote .*state\.json from memory: it holds every answered write/);
    const again = await startServe(['--state', file]);
    const state = await readStateAt(file);
    for (const id of answered) expect(state?.clients[id], id).toBeDefined();
    expect(Object.keys(state?.clients ?? {})).toHaveLength(answered.length);
    expect(await again.stop()).toBe(0);
  });

  it('41.10: a state folder removed by hand (rm -rf) is noticed before the next write is acknowledged, and serve stops (exit 3) saying that nothing is written back', async () => {
    const dir = join(await scratchDir(), 'state');
    const file = join(dir, 'state.json');
    const serve = await startServe(['--state', file]);
    expect((await tokens(serve)).status).toBe(200);
    await rm(dir, { recursive: true, force: true });
    expect((await tokens(serve)).status).toBe(500);
    expect(await serve.exit).toBe(3);
    expect(serve.stderr()).toContain(`the state folder ${dir} was removed while serve ran; stopped acknowledging writes`);
    expect(serve.stderr()).toContain('nothing is written back');
    expect(existsSync(dir)).toBe(false);
  });
});

describe('state files removed under an idle serve (issue 41.10)', () => {
  it('41.10: a state folder removed while no request comes is found by the lock, which went with it, and told as the folder removed (exit 3)', async () => {
    const dir = join(await scratchDir(), 'state');
    const file = join(dir, 'state.json');
    const serve = await startServe(['--state', file]);
    expect((await tokens(serve)).status).toBe(200);
    await rm(dir, { recursive: true, force: true });
    // No request: the lock's refresh (every second) is what notices.
    expect(await serve.exit).toBe(3);
    expect(serve.stderr()).toContain(`the state folder ${dir} was removed while serve ran; stopped acknowledging writes`);
    expect(serve.stderr()).not.toContain('lost the lock');
  });
});

describe('a serve that lost its lock (issue 41.9)', () => {
  it('41.9: a commit checks that the lock is still its own before it writes and before it is acknowledged, not only on the refresh timer: after another process made the lock anew, it fails, writes nothing and is rolled back', async () => {
    const file = join(await scratchDir(), 'state.json');
    const lockDir = `${file}.lock`;
    await mkdir(lockDir);
    const lost: Error[] = [];
    const persistence = new FilePersistence(file, { lockDir, onLost: (e) => lost.push(e) });
    const repo = new Repository((await persistence.load()) ?? emptyState());
    repo.put('revoked_access_tokens', 'a', 1);
    await persistence.commit(repo);
    const journal = () => readFile(journalFileFor(file), 'utf8').catch(() => null);
    const before = await journal();
    // Stood still (SIGSTOP) while its lock was removed and another process took it: the lock is made anew.
    await rm(lockDir, { recursive: true });
    await mkdir(lockDir);
    repo.put('revoked_access_tokens', 'b', 2);
    await expect(persistence.commit(repo)).rejects.toThrow(/the lock .*\.lock is no longer this process's/);
    expect(await journal()).toBe(before);
    expect(repo.has('revoked_access_tokens', 'b')).toBe(false);
    expect(lost.map((e) => e.message)).toEqual([expect.stringMatching(/stopped acknowledging writes.*nothing more is written/)]);
    // And nothing after it either.
    repo.put('revoked_access_tokens', 'c', 3);
    await expect(persistence.commit(repo)).rejects.toThrow(/no longer this process's/);
    await persistence.close();
    expect(await journal()).toBe(before);
    expect(Object.keys((await readStateAt(file))?.revoked_access_tokens ?? {})).toEqual(['a']);
  });
});

describe('one writer per file, whatever its name (issue 41.9)', () => {
  it(
    '41.9: a hard link to a served state file from another folder is refused (exit 3, naming the file it is): the lock is on the file, its device and inode, not only its path',
    { timeout: 30_000 },
    async () => {
      const first = join(await scratchDir(), 'state.json');
      const serve = await startServe(['--state', first]);
      expect((await tokens(serve)).status).toBe(200);
      // Served: its lock by identity is held. The folder is the machine's, and a lock a serve another test killed left for
      // an earlier file with this inode number is waited out first (the case after this one).
      const { dev, ino } = await stat(first);
      const note = join(tmpdir(), `agent-access-${process.getuid?.() ?? 'user'}`, `${dev}-${ino}.json`);
      await vi.waitFor(async () => expect(JSON.parse(await readFile(note, 'utf8'))).toMatchObject({ path: first }), {
        timeout: 10_000,
        interval: 100,
      });
      const other = join(await scratchDir(), 'state.json');
      await link(first, other);
      const { code, stderr } = await runCli(['serve', '--state', other, '--port', '0', '--auth-port', '0']);
      expect(code, stderr).toBe(3);
      expect(stderr).toContain(`state file ${other} is the same file as ${first} (a hard link), which pid ${serve.child.pid} serves`);
      // The first serve is untouched, and once it stopped, the other name may be served (by one process at a time).
      expect((await tokens(serve)).status).toBe(200);
      expect(await serve.stop()).toBe(0);
    },
  );

  it(
    '41.9: a lock by identity held for a path that is another file now (inode numbers are reused) refuses nothing: it is waited for, then the start goes on',
    { timeout: 30_000 },
    async () => {
      const file = join(await scratchDir(), 'state.json');
      await writeFile(file, '');
      const other = join(await scratchDir(), 'state.json');
      await writeFile(other, ''); // another file: another inode
      const { dev, ino } = await stat(file);
      const key = join(tmpdir(), `agent-access-${process.getuid?.() ?? 'user'}`, `${dev}-${ino}`);
      await mkdir(dirname(key), { recursive: true, mode: 0o700 });
      // The folder is the machine's: a serve another test killed may have left a lock for a deleted file that had this
      // inode number, fresh enough to be held. This test plays that holder itself, so it starts from no lock.
      await rm(`${key}.lock`, { recursive: true, force: true });
      // Held for `other`, as by a serve whose earlier file had this file's inode number, until it moves its lock.
      const held = await lockfile.lock(key, { realpath: false, update: 1_000, stale: 5_000 });
      await writeFile(`${key}.json`, JSON.stringify({ path: other, pid: process.pid }));
      setTimeout(() => void held(), 1_000);
      const notices: string[] = [];
      const release = await lockStateFile(file, { onNotice: (line) => notices.push(line) });
      expect(notices).toEqual([]);
      expect(JSON.parse(await readFile(`${key}.json`, 'utf8'))).toEqual({ path: file, pid: process.pid });
      await release();
    },
  );

  it(
    '41.9: a lock by identity whose note a kill cut short (an empty file) is a holder named nowhere: waited for until released or stale, then the start goes on (CI: SyntaxError at a restart after kill -9)',
    { timeout: 30_000 },
    async () => {
      const file = join(await scratchDir(), 'state.json');
      await writeFile(file, '');
      const { dev, ino } = await stat(file);
      const key = join(tmpdir(), `agent-access-${process.getuid?.() ?? 'user'}`, `${dev}-${ino}`);
      await mkdir(dirname(key), { recursive: true, mode: 0o700 });
      await rm(`${key}.lock`, { recursive: true, force: true });
      // Held by a serve killed while it wrote its note: the lock stays until stale, the note is empty.
      const held = await lockfile.lock(key, { realpath: false, update: 1_000, stale: 5_000 });
      await writeFile(`${key}.json`, '');
      setTimeout(() => void held(), 1_000);
      const release = await lockStateFile(file);
      expect(JSON.parse(await readFile(`${key}.json`, 'utf8'))).toEqual({ path: file, pid: process.pid });
      await release();
    },
  );

  it(
    '41.9: a lock by identity held for another file now, then taken by a serve of a hard link to this file (it writes its note after taking the lock), refuses the start',
    { timeout: 30_000 },
    async () => {
      const file = join(await scratchDir(), 'state.json');
      await writeFile(file, '');
      const linked = join(await scratchDir(), 'state.json');
      await link(file, linked);
      const { dev, ino } = await stat(file);
      const key = join(tmpdir(), `agent-access-${process.getuid?.() ?? 'user'}`, `${dev}-${ino}`);
      await mkdir(dirname(key), { recursive: true, mode: 0o700 });
      await rm(`${key}.lock`, { recursive: true, force: true });
      // The lock of a serve whose earlier file had this inode number, its note not yet rewritten by the serve of `linked`
      // that has just taken it over; the note follows a second later.
      const held = await lockfile.lock(key, { realpath: false, update: 1_000, stale: 5_000 });
      await writeFile(`${key}.json`, JSON.stringify({ path: join(await scratchDir(), 'gone.json'), pid: 1 }));
      const noted = setTimeout(() => void writeFile(`${key}.json`, JSON.stringify({ path: linked, pid: 4242 })), 1_000);
      const started = Date.now();
      try {
        await expect(lockStateFile(file)).rejects.toThrow(
          `state file ${file} is the same file as ${linked} (a hard link), which pid 4242 serves`,
        );
        expect(Date.now() - started).toBeLessThan(5_000);
      } finally {
        clearTimeout(noted);
        await held();
        await rm(`${key}.json`, { force: true });
      }
    },
  );

  it('41.9: locks by identity that killed holders left long ago are removed at a start, so the folder does not grow run after run; recent ones stay', async () => {
    const dir = join(tmpdir(), `agent-access-${process.getuid?.() ?? 'user'}`);
    // Names no file has (inode 0 on device 0); written as a holder killed two hours ago left them, and one just now.
    const old = join(dir, '0-0');
    const recent = join(dir, '0-1');
    await mkdir(dir, { recursive: true, mode: 0o700 });
    await mkdir(`${old}.lock`, { recursive: true });
    await writeFile(`${old}.json`, '{}');
    await writeFile(`${recent}.json`, '{}');
    const longAgo = new Date(Date.now() - 2 * 60 * 60_000);
    await Promise.all([utimes(`${old}.lock`, longAgo, longAgo), utimes(`${old}.json`, longAgo, longAgo)]);
    try {
      const serve = await startServe(['--state', join(await scratchDir(), 'state.json')]);
      expect(await serve.stop()).toBe(0);
      expect(existsSync(`${old}.lock`)).toBe(false);
      expect(existsSync(`${old}.json`)).toBe(false);
      expect(existsSync(`${recent}.json`)).toBe(true);
    } finally {
      await Promise.all([
        rm(`${old}.lock`, { recursive: true, force: true }),
        rm(`${old}.json`, { force: true }),
        rm(`${recent}.json`, { force: true }),
      ]);
    }
  });

  it("41.9: a serve killed with its lock by the file's identity held does not keep its own restart waiting", async () => {
    const file = join(await scratchDir(), 'state.json');
    const serve = await startServe(['--state', file]);
    serve.child.kill('SIGKILL');
    await serve.exit;
    const again = await startServe(['--state', file]);
    expect(again.stderr()).not.toMatch(/waiting for the lock/);
    expect(await again.stop()).toBe(0);
  });
});

describe('what lives beside the state follows a rollback (issue 41.8)', () => {
  it('41.8: an approved write action whose commit fails is not applied: the workspace and search go back with the state', async () => {
    const file = join(await scratchDir(), 'state.json');
    const errors: string[] = [];
    const emu = await startEmulator({ state: file, onError: (e) => errors.push(e.message) });
    const issued = await postJson(`${emu.adminUrl}/tokens`, { scopes: ['ask', 'workspace.write'] }, bearer(emu.adminToken));
    const access = await authenticate(emu.core, `Bearer ${(issued.json() as { access_token: string }).access_token}`, null);
    const asked = (await emu.plane.ask(access, 'Lege einen Kontakt „Bernd Zirbelhuber“ an, Telefon: 0171 2345678.')).value as {
      action_id: string;
    };
    await emu.plane.decide(access.person_id, asked.action_id, 'approve');
    const titles = async () => (await emu.resources.search.search('Zirbelhuber', { person: access.person_id })).map((h) => h.title);
    const changes = emu.core.state.workspace_changes.length;
    // The commit that applies it fails: its journal was removed (41.10), which rolls it back as any failed commit.
    await rm(journalFileFor(file), { force: true });
    await expect(emu.plane.continueAsk(access, asked.action_id)).rejects.toThrow(/was removed while serve ran/);
    expect(emu.core.state.workspace_changes).toHaveLength(changes);
    expect(emu.core.state.pending_actions[asked.action_id]?.status).toBe('approved');
    expect(await titles()).not.toContain('Bernd Zirbelhuber');
    expect(errors.join('\n')).toContain('stopped acknowledging writes');
  });
});
