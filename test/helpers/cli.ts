import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';

export const BIN = fileURLToPath(new URL('../../bin/agent-access.js', import.meta.url));

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Where a child's stderr goes: a pipe read into a string, or with `stderrFile` that file. What Node itself prints
 * (NODE_DEBUG_NATIVE) goes straight to the descriptor, around Node's own stream: through a pipe, runs of those lines
 * were seen missing (Node 22, a busy test process). A file loses none.
 */
function stderrOf(child: ChildProcess, stderrFile: string | undefined): () => string {
  if (stderrFile !== undefined) return () => readFileSync(stderrFile, 'utf8');
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  return () => stderr;
}

const stderrTo = (stderrFile: string | undefined) => (stderrFile === undefined ? 'pipe' : openSync(stderrFile, 'w', 0o600));

/** Runs the built CLI to completion. */
export async function runCli(
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number; stderrFile?: string } = {},
): Promise<RunResult> {
  const err = stderrTo(options.stderrFile);
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd: options.cwd,
    env: { ...process.env, NO_COLOR: '1', ...options.env },
    stdio: ['ignore', 'pipe', err],
  });
  if (typeof err === 'number') closeSync(err);
  let stdout = '';
  child.stdout!.on('data', (d) => (stdout += d));
  const stderr = stderrOf(child, options.stderrFile);
  const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 20_000);
  const [code] = (await once(child, 'exit')) as [number | null];
  clearTimeout(timer);
  return { code, stdout, stderr: stderr() };
}

export interface ServeProcess {
  child: ChildProcess;
  ready: { base_url: string; auth_url: string; issuer: string; state: string | null; admin_url: string; admin_token: string };
  readyLine: string;
  stderr: () => string;
  stdoutRest: () => string;
  exit: Promise<number | null>;
  /** SIGTERM, then its exit code once it has stopped. */
  stop(): Promise<number | null>;
}

/** SIGKILL, as a crash would end it (nothing when it has ended already), and once it has exited. */
export async function killServe(s: ServeProcess): Promise<void> {
  if (s.child.exitCode === null && s.child.signalCode === null) s.child.kill('SIGKILL');
  await s.exit;
}

/**
 * Starts `agent-access serve --json` and resolves with its ready line; it is killed after the test if still running.
 * `bin` runs another build (a copy of the package), `nodeArgs` go to node before it. `ownedByCaller`: the caller kills
 * it (a concurrent test, whose neighbours' ends must not; a campaign run in a `beforeAll`, outside any test).
 */
export async function startServe(
  args: string[],
  options: {
    cwd?: string;
    bin?: string;
    nodeArgs?: string[];
    env?: NodeJS.ProcessEnv;
    ownedByCaller?: boolean;
    stderrFile?: string;
  } = {},
): Promise<ServeProcess> {
  const err = stderrTo(options.stderrFile);
  const child = spawn(
    process.execPath,
    [...(options.nodeArgs ?? []), options.bin ?? BIN, 'serve', '--port', '0', '--auth-port', '0', '--json', ...args],
    { cwd: options.cwd, env: options.env ? { ...process.env, ...options.env } : undefined, stdio: ['ignore', 'pipe', err] },
  );
  if (typeof err === 'number') closeSync(err);
  const stderrNow = stderrOf(child, options.stderrFile);
  let rest = '';
  const exit = once(child, 'exit').then(([code]) => code as number | null);
  const lines = createInterface({ input: child.stdout! });
  const readyLine = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not become ready: ${stderrNow()}`)), 15_000);
    lines.once('line', (line) => {
      clearTimeout(timer);
      resolve(line);
    });
    void exit.then((code) => reject(new Error(`serve exited with ${code}: ${stderrNow()}`)));
  });
  lines.on('line', (line) => (rest += line + '\n'));
  const stop = () => {
    child.kill('SIGTERM');
    return exit;
  };
  const started: ServeProcess = {
    child,
    ready: JSON.parse(readyLine),
    readyLine,
    stderr: stderrNow,
    stdoutRest: () => rest,
    exit,
    stop,
  };
  // A serve a test left running (it failed before stopping it, or never meant to) is killed when the test ends.
  if (!options.ownedByCaller) onTestFinished(() => killServe(started));
  return started;
}

/**
 * A folder and serves of one concurrent test's own (`it.concurrent`), removed and killed when it ends: for tests that
 * mostly wait on real time with nothing to compute (a lock going stale), which then wait together. The clean-up after
 * each test of startServe and scratchDir would end a neighbour's serve and folder.
 */
export async function onItsOwn(
  test: (own: { dir: string; serve: (args: string[]) => Promise<ServeProcess> }) => Promise<void>,
): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'agent-access-'));
  const serves: ServeProcess[] = [];
  try {
    await test({
      dir,
      serve: async (args) => {
        const s = await startServe(args, { ownedByCaller: true });
        serves.push(s);
        return s;
      },
    });
  } finally {
    for (const s of serves) await killServe(s);
    await rm(dir, { recursive: true, force: true });
  }
}
