import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { cpus, tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { FlowError } from './flow.js';
import type { LoadConfig, LoadOutput, RunSummary } from './load.js';

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export class BenchError extends Error {}

/** A failure the bench reports and goes on from (a server that would not start, a flow step that failed). */
export const isBenchFailure = (e: unknown): e is Error => e instanceof BenchError || e instanceof FlowError;

export const log = (msg: string): void => {
  process.stderr.write(`[bench] ${msg}\n`);
};

const BENCH_DIR = path.dirname(fileURLToPath(import.meta.url)); // build/bench
const LOAD_JS = path.join(BENCH_DIR, 'load.js');

// ---------- cleanup registry: every child and temp dir is tracked so exit paths can reap them ----------

const liveChildren = new Set<ChildProcess>();
const tempDirs = new Set<string>();

/** Registers a child spawned elsewhere so the exit paths reap it too. */
export function trackChild(c: ChildProcess): void {
  liveChildren.add(c);
  c.once('exit', () => liveChildren.delete(c));
}

export function makeTempDir(prefix: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  tempDirs.add(dir);
  return dir;
}

export function removeTempDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  tempDirs.delete(dir);
}

export function cleanupSync(): void {
  for (const c of liveChildren) {
    if (c.exitCode === null && c.signalCode === null) {
      try {
        c.kill('SIGKILL');
      } catch {
        /* already gone */
      }
    }
  }
  liveChildren.clear();
  for (const d of tempDirs) {
    try {
      rmSync(d, { recursive: true, force: true });
    } catch {
      /* best effort */
    }
  }
  tempDirs.clear();
}

export function installCleanupHandlers(hardLimitMs: number): void {
  process.on('exit', cleanupSync);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(sig, () => {
      console.error(`\n[bench] received ${sig}, cleaning up`);
      cleanupSync();
      process.exit(130);
    });
  }
  // Hard bound on the whole run, whatever hangs.
  const t = setTimeout(() => {
    console.error(`\n[bench] FAILED: hard time limit of ${Math.round(hardLimitMs / 1000)} s reached, aborting`);
    cleanupSync();
    process.exit(3);
  }, hardLimitMs);
  t.unref();
}

// ---------- ports ----------

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      if (addr === null || typeof addr === 'string') {
        srv.close();
        reject(new Error('no port'));
        return;
      }
      const port = addr.port;
      srv.close(() => resolve(port));
    });
  });
}

export async function freePorts(n: number): Promise<number[]> {
  // Hold all listeners open at once so the same port is not handed out twice.
  const servers: net.Server[] = [];
  const ports: number[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const srv = net.createServer();
      servers.push(srv);
      await new Promise<void>((res, rej) => {
        srv.once('error', rej);
        srv.listen(0, '127.0.0.1', () => res());
      });
      const addr = srv.address();
      if (addr === null || typeof addr === 'string') throw new Error('no port');
      ports.push(addr.port);
    }
  } finally {
    await Promise.all(servers.map((s) => new Promise<void>((res) => s.close(() => res()))));
  }
  return ports;
}

// ---------- child processes ----------

export interface Proc {
  name: string;
  child: ChildProcess;
  spawnedAt: number;
  stdoutLines: string[];
  /** ms since spawn at which each stdout line arrived */
  lineTimes: number[];
  stderrTail: string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  hasExited: boolean;
}

const TAIL = 16_000;

export function startProc(name: string, args: string[], cwd: string, env?: NodeJS.ProcessEnv): Proc {
  const spawnedAt = performance.now();
  const child = spawn(process.execPath, args, {
    cwd,
    env: env ?? process.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  liveChildren.add(child);
  const proc: Proc = {
    name,
    child,
    spawnedAt,
    stdoutLines: [],
    lineTimes: [],
    stderrTail: '',
    hasExited: false,
    exited: new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        proc.hasExited = true;
        liveChildren.delete(child);
        resolve({ code, signal });
      });
      child.once('error', (err) => {
        proc.hasExited = true;
        proc.stderrTail += `\n[spawn error] ${err.message}`;
        liveChildren.delete(child);
        resolve({ code: -1, signal: null });
      });
    }),
  };
  if (child.stdout) {
    createInterface({ input: child.stdout }).on('line', (line) => {
      if (proc.stdoutLines.length < 200) {
        proc.stdoutLines.push(line);
        proc.lineTimes.push(performance.now() - spawnedAt);
      }
    });
  }
  child.stderr?.on('data', (d: Buffer) => {
    proc.stderrTail = (proc.stderrTail + d.toString()).slice(-TAIL);
  });
  return proc;
}

export async function stopProc(p: Proc, graceMs = 4000): Promise<void> {
  if (p.hasExited) return;
  p.child.kill('SIGTERM');
  // The grace timer is cleared on exit: a long grace must not keep the bench alive after its last server stopped.
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), graceMs)));
  const r = await Promise.race([p.exited.then(() => 'exited' as const), timeout]);
  clearTimeout(timer);
  if (r === 'timeout') {
    console.error(`[bench] ${p.name} did not exit within ${graceMs} ms of SIGTERM, sending SIGKILL`);
    p.child.kill('SIGKILL');
    await Promise.race([p.exited, sleep(2000)]);
  }
}

export function describeProc(p: Proc): string {
  const out = p.stdoutLines.slice(-20).join('\n');
  return `--- ${p.name} stdout (last lines) ---\n${out}\n--- ${p.name} stderr (tail) ---\n${p.stderrTail.slice(-4000)}`;
}

/** Arguments of ours: `serve` on the two given ports, JSON ready line, no request log (the baselines log nothing either). */
export function serveArgs(bin: string, [port, authPort]: number[], extra: string[]): string[] {
  return [bin, 'serve', '--port', String(port), '--auth-port', String(authPort), ...extra, '--json', '--quiet'];
}

// ---------- HTTP polling ----------

/** One GET with a fresh connection; resolves the status once the body has been read, or undefined on error. */
export function getStatus(url: string, timeoutMs: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    let done = false;
    const finish = (v: number | undefined): void => {
      if (!done) {
        done = true;
        resolve(v);
      }
    };
    const req = http.get(url, { agent: false, timeout: timeoutMs }, (res) => {
      res.on('data', () => {});
      res.on('end', () => finish(res.statusCode));
      res.on('error', () => finish(undefined));
    });
    req.on('timeout', () => {
      req.destroy();
      finish(undefined);
    });
    req.on('error', () => finish(undefined));
  });
}

/**
 * Polls until the URL answers 200. Returns ms since the process was spawned.
 * Bounded by deadlineMs and by the child exiting.
 */
export async function pollUntil200(p: Proc, url: string, deadlineMs: number, intervalMs = 2): Promise<number> {
  const maxAttempts = Math.ceil(deadlineMs / intervalMs) + 10;
  for (let i = 0; i < maxAttempts; i++) {
    if (p.hasExited) {
      throw new BenchError(`${p.name} exited before answering 200 on ${url}\n${describeProc(p)}`);
    }
    const elapsed = performance.now() - p.spawnedAt;
    if (elapsed > deadlineMs) break;
    const status = await getStatus(url, 500);
    if (status === 200) return performance.now() - p.spawnedAt;
    await sleep(intervalMs);
  }
  throw new BenchError(`${p.name} did not answer 200 on ${url} within ${deadlineMs} ms\n${describeProc(p)}`);
}

/** Waits for the first stdout line that parses as a JSON object having `key`. */
export async function waitForJsonLine(p: Proc, key: string, deadlineMs: number): Promise<Record<string, unknown>> {
  return (await waitForJsonLineTimed(p, key, deadlineMs)).obj;
}

/**
 * Same, also returning when (ms since spawn) the line arrived. `between`, if given, runs between two looks at the
 * output, followed by a sleep of 2 ms instead of 5.
 */
export async function waitForJsonLineTimed(
  p: Proc,
  key: string,
  deadlineMs: number,
  between?: () => Promise<unknown>,
): Promise<{ obj: Record<string, unknown>; atMs: number }> {
  const start = performance.now();
  let seen = 0;
  while (performance.now() - start < deadlineMs) {
    for (; seen < p.stdoutLines.length; seen++) {
      const line = p.stdoutLines[seen]!.trim();
      if (!line.startsWith('{')) continue;
      try {
        const obj = JSON.parse(line) as unknown;
        if (obj !== null && typeof obj === 'object' && key in obj) return { obj: obj as Record<string, unknown>, atMs: p.lineTimes[seen]! };
      } catch {
        /* not JSON */
      }
    }
    if (p.hasExited) throw new BenchError(`${p.name} exited before printing its ready line\n${describeProc(p)}`);
    await between?.();
    await sleep(between ? 2 : 5);
  }
  throw new BenchError(`${p.name} printed no JSON ready line with "${key}" within ${deadlineMs} ms\n${describeProc(p)}`);
}

// ---------- machine noise ----------

function readCpuTimes(): { busy: number; total: number } | undefined {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
    const f = line.trim().split(/\s+/).slice(1).map(Number);
    const total = f.reduce((a, b) => a + b, 0);
    const idle = (f[3] ?? 0) + (f[4] ?? 0);
    return { busy: total - idle, total };
  } catch {
    return undefined; // not Linux
  }
}

function readOwnTicks(): number | undefined {
  try {
    // Fields after the ")" of comm: utime stime cutime cstime are the 12th..15th (ours + reaped children).
    const st = readFileSync('/proc/self/stat', 'utf8');
    const f = st
      .slice(st.lastIndexOf(')') + 2)
      .split(' ')
      .map(Number);
    return (f[11] ?? 0) + (f[12] ?? 0) + (f[13] ?? 0) + (f[14] ?? 0);
  } catch {
    return undefined;
  }
}

/**
 * Measures CPU used by processes outside this bench (e.g. a test run in another session) over an interval,
 * in cores. Exact only when all our children have been reaped at stop() time, which is how it is used.
 */
export class NoiseMeter {
  #m = readCpuTimes();
  #own = readOwnTicks();
  stop(): number | undefined {
    const m = readCpuTimes();
    const own = readOwnTicks();
    if (!this.#m || !m || this.#own === undefined || own === undefined || m.total === this.#m.total) return undefined;
    const wallTicks = (m.total - this.#m.total) / cpus().length;
    return Math.max(0, (m.busy - this.#m.busy - (own - this.#own)) / wallTicks);
  }
}

/** Cores kept busy machine-wide over sampleMs (all processes, including ones in other sessions). */
export async function cpuBusyCores(sampleMs: number): Promise<number | undefined> {
  const a = readCpuTimes();
  await sleep(sampleMs);
  const b = readCpuTimes();
  if (!a || !b || b.total === a.total) return undefined;
  return ((b.busy - a.busy) / (b.total - a.total)) * cpus().length;
}

// ---------- stats ----------

export function median(xs: number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

export function round(x: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

export function fmt(x: number | undefined | null, d = 1): string {
  return x === undefined || x === null || Number.isNaN(x) ? '-' : round(x, d).toString();
}

/** A ratio with two decimals, or two significant digits below 0.1 (0.0041 is not 0). */
export function fmtRatio(x: number | undefined | null): string {
  return x !== undefined && x !== null && x !== 0 && Math.abs(x) < 0.1 ? x.toPrecision(2) : fmt(x, 2);
}

export function pad(s: string, n: number): string {
  return s.length >= n ? s : s + ' '.repeat(n - s.length);
}

/** A target check printed in the report and written to the results: ok is null when it could not be measured. */
export interface Target {
  name: string;
  value: number | null;
  target: string;
  ok: boolean | null;
  /** printed after the mark, e.g. a related figure */
  note?: string;
}

// ---------- load generator ----------

export function briefRun(name: string, r: RunSummary): string {
  return (
    `${name}: ${round(r.reqPerSecMean, 0)} req/s, 2xx=${r.total2xx} non2xx=${r.non2xx} errors=${r.errors} timeouts=${r.timeouts} ` +
    `p50=${r.latencyMsP50}ms p99=${r.latencyMsP99}ms`
  );
}

/** Runs build/bench/load.js in its own process with `cfg` (bounded by the config's durations) and returns its result. */
export async function runLoad(cfg: LoadConfig): Promise<LoadOutput> {
  const child = spawn(process.execPath, [LOAD_JS], { cwd: path.resolve(BENCH_DIR, '..', '..'), stdio: ['pipe', 'pipe', 'pipe'] });
  trackChild(child);
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-8000)));
  child.stdin.end(JSON.stringify(cfg));
  const limitMs = (cfg.warmupSec + cfg.durationSec + 40 + (cfg.timeoutSec ?? 10)) * 1000;
  const code = await new Promise<number | null>((resolve) => {
    const t = setTimeout(() => {
      child.kill('SIGKILL');
      resolve(-1);
    }, limitMs);
    child.once('exit', (c) => {
      clearTimeout(t);
      resolve(c);
    });
  });
  if (code !== 0) throw new BenchError(`load generator exited with ${code}\n${err}`);
  if (err.trim() !== '') log(`load stderr: ${err.trim()}`);
  return JSON.parse(out.trim().split('\n').at(-1)!) as LoadOutput;
}

// ---------- memory ----------

/** Peak resident set size (VmHWM) of a live process, in KiB; undefined when it is gone or this is not Linux. */
export function peakRssKb(pid: number): number | undefined {
  try {
    const m = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}
