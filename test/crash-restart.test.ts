import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { readFile, stat, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { ledgerText } from '../src/core/state/charges.js';
import { readStateAt } from '../src/store/file-persistence.js';
import { lockStateFile } from '../src/store/lock.js';
import { killServe, onItsOwn, runCli, startServe, type ServeProcess } from './helpers/cli.js';
import { scratchDir } from './helpers/emulator.js';
import { authorizeAndApprove, http, postJson } from './helpers/oauth.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});
const notices = (stderr: string) => stderr.split('\n').filter((line) => line.startsWith('agent-access: ') && !/ (GET|POST) /.test(line));

/** A serve of `dir`'s state.json, killed: its lock and its admin file are left, naming its pid. */
async function killedServe(dir: string, serve: (args: string[]) => Promise<ServeProcess>) {
  const state = join(dir, 'state.json');
  const adminFile = join(dir, 'state.admin.json');
  const first = await serve(['--state', state]);
  await killServe(first);
  return { state, adminFile, pid: first.child.pid!, mtime: (await stat(adminFile)).mtime };
}

describe('serve after kill -9', () => {
  it(
    "the lock of a holder killed with SIGKILL is taken at once (its admin file names a pid that is gone), with one notice on stderr; the journal replayed, a ledger line beyond the state's charges rewritten away and a killed writer's temp file removed, one notice each",
    { timeout: 30_000 },
    async () => {
      const dir = await scratchDir();
      const state = join(dir, 'state.json');
      const ledger = join(dir, 'state.charges.jsonl');
      const first = await startServe(['--state', state]);
      const flow = await authorizeAndApprove({ baseUrl: first.ready.base_url, authUrl: first.ready.auth_url });
      expect(
        (
          await postJson(
            `${first.ready.base_url}/chat/ask`,
            { question: 'Kaution' },
            { authorization: `Bearer ${flow.tokens!.access_token}` },
          )
        ).status,
      ).toBe(200);
      await killServe(first);
      expect(existsSync(`${state}.lock`)).toBe(true);
      // The ledger file is appended after the answer, so the kill may have come first: it is written from the
      // state's charges here, with a line beyond them, as an edit or an older version's cut-short commit leaves it.
      const committed = ledgerText(Object.values((await readStateAt(state))!.charge_ledger));
      await writeFile(ledger, `${committed}${JSON.stringify({ ...JSON.parse(committed), seq: 2 })}\n`);
      // And what a writer killed in the middle of a compaction leaves: its temp file beside the state file.
      const temp = join(dir, '.state.json.AbCdEf012345.tmp');
      await writeFile(temp, '{"half": ');
      const second = await startServe(['--state', state]);
      // The writer starts on the files after the ready line and says what it removed when it has: awaited on its own.
      const removed = `agent-access: removed 1 temp file left by a writer that was stopped mid-write, beside ${state}`;
      await expect.poll(() => notices(second.stderr()), { timeout: 10_000 }).toContain(removed);
      expect(existsSync(temp)).toBe(false);
      // Taken at once, not after waiting for the dead holder's lock to go stale (that path says it waits, below it
      // would be one more notice): the notices name the path taken, which a wall-clock bound on a loaded machine cannot.
      const lines = notices(second.stderr()).filter((line) => line !== removed);
      expect(lines).toEqual([
        expect.stringMatching(
          new RegExp(
            `^agent-access: took over the lock on ${state} from pid ${first.child.pid} \\(named in ${join(dir, 'state.admin.json')}\\), whose process is gone; the lock was last refreshed \\d+\\.\\d s ago$`,
          ),
        ),
        // The answered requests were in the journal only: replayed.
        expect.stringMatching(/^agent-access: replayed \d+ journal records? from .*state\.journal\.jsonl \(the last stop was not clean\)$/),
        expect.stringContaining(
          `agent-access: rewrote charge ledger ${ledger} from the 1 charge in ${state}: it held lines beyond the charges the state holds`,
        ),
      ]);
      expect(second.stdoutRest()).toBe('');
      expect(await readFile(ledger, 'utf8')).toBe(committed);
      expect((await http(`${second.ready.base_url}/.well-known/oauth-authorization-server`)).status).toBe(200);
      // While the second one lives, a third is refused at once.
      const third = await runCli(['serve', '--port', '0', '--auth-port', '0', '--state', state]);
      expect(third.code).toBe(3);
      expect(third.stderr).toContain('in use');
    },
  );

  it.runIf(process.platform === 'linux')(
    'an admin file whose pid now belongs to a process started after the file was written (a restarted container) holds nothing: the lock is taken at once',
    { timeout: 30_000 },
    async () => {
      const { state, adminFile, mtime } = await killedServe(await scratchDir(), startServe);
      // Wall-clock time is the subject: a pid counts as reused only when its process started more than a second
      // (the margin for clock-tick rounding) after the admin file was written.
      await sleep(1_500);
      // The dead server's pid now belongs to a process that started after it announced itself.
      const newcomer = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60_000)'], { stdio: 'ignore' });
      cleanups.push(() => newcomer.kill('SIGKILL'));
      await once(newcomer, 'spawn');
      await writeFile(adminFile, JSON.stringify({ ...JSON.parse(await readFile(adminFile, 'utf8')), pid: newcomer.pid }));
      await utimes(adminFile, mtime, mtime);
      const second = await startServe(['--state', state]);
      // One notice, the takeover: no wait for staleness (which would have said so).
      expect(notices(second.stderr())).toEqual([expect.stringContaining(`took over the lock on ${state} from pid ${newcomer.pid}`)]);
    },
  );

  it.concurrent(
    'an admin file whose pid is alive and older than the file (a serve that is stopping, its port closed) is no proof: serve waits with a notice, and is refused while the lock is refreshed',
    { timeout: 30_000 },
    () =>
      onItsOwn(async ({ dir, serve }) => {
        const { state, adminFile } = await killedServe(dir, serve);
        // A live process holds the lock, then the admin file names it: a pid alive since before the file, its port closed.
        const release = await lockStateFile(state);
        try {
          await sleep(50);
          await writeFile(adminFile, JSON.stringify({ ...JSON.parse(await readFile(adminFile, 'utf8')), pid: process.pid }));
          const res = await runCli(['serve', '--port', '0', '--auth-port', '0', '--json', '--state', state], { timeoutMs: 25_000 });
          expect(res.code).toBe(3);
          expect(res.stdout).toBe('');
          expect(res.stderr).toContain('in use');
          expect(notices(res.stderr)[0]).toMatch(
            new RegExp(
              `^agent-access: waiting for the lock on ${state}, last refreshed \\d+\\.\\d s ago by pid ${process.pid} \\(named in ${adminFile}\\), whose admin port does not take connections`,
            ),
          );
        } finally {
          await release();
        }
      }),
  );

  it.concurrent(
    'an admin file written in another pid namespace or on another host proves nothing: its lock is waited out until stale, with a notice',
    { timeout: 30_000 },
    () =>
      onItsOwn(async ({ dir, serve }) => {
        const { state, adminFile, mtime, pid } = await killedServe(dir, serve);
        await writeFile(adminFile, JSON.stringify({ ...JSON.parse(await readFile(adminFile, 'utf8')), pid_namespace: 'elsewhere' }));
        await utimes(adminFile, mtime, mtime);
        const started = Date.now();
        const second = await serve(['--state', state]);
        // Staleness: 5 s after the last refresh, which was at most a second before the kill.
        expect(Date.now() - started).toBeGreaterThan(3_000);
        expect(notices(second.stderr())[0]).toMatch(
          new RegExp(
            `^agent-access: waiting for the lock on ${state}, last refreshed \\d+\\.\\d s ago by pid ${pid} \\(named in ${adminFile}\\)`,
          ),
        );
      }),
  );
});
