// Scenario "cli": what the command line costs to start, spawn to exit, against `node -e 0` on the same machine in the
// same run: `--help`, `--version`, and `token` with a valid stored token, which scripts call inside $(…) before every
// request. The token comes from a real login (`serve --in-memory --consent approve`, `login --headless`); the
// emulator is stopped before the timing, so a `token` that went to the network would fail instead of look slow.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import {
  BenchError,
  fmt,
  fmtRatio,
  isBenchFailure,
  log,
  makeTempDir,
  median,
  NoiseMeter,
  pad,
  removeTempDir,
  round,
  serveArgs,
  sleep,
  startProc,
  stopProc,
  trackChild,
  waitForJsonLine,
  type Target,
} from './util.js';

export interface CliOpts {
  /** timed runs of each command line, interleaved */
  runs: number;
  /** the CLI (bin/agent-access.js) and the directory to run the emulator in */
  bin: string;
  root: string;
}

/** The 2× bound of issue 22: a command line may cost at most twice a bare Node start. */
const TARGET_RATIO = 2;
const RUN_DEADLINE_MS = 20_000;
const SETUP_DEADLINE_MS = 30_000;

interface CliCase {
  key: string;
  label: string;
  args: (bin: string) => string[];
  /** a target of issue 22 (the others are informational) */
  target: boolean;
}

const CASES: CliCase[] = [
  { key: 'node', label: 'node -e 0', args: () => ['-e', '0'], target: false },
  { key: 'help', label: 'agent-access --help', args: (bin) => [bin, '--help'], target: true },
  { key: 'version', label: 'agent-access --version', args: (bin) => [bin, '--version'], target: false },
  { key: 'token', label: 'agent-access token', args: (bin) => [bin, 'token'], target: true },
];

export interface CliStats {
  label: string;
  median_ms: number;
  min_ms: number;
  max_ms: number;
  samples_ms: number[];
  /** median / the median of `node -e 0` */
  ratio?: number;
}

export interface CliResults {
  runs: number;
  commands: Record<string, CliStats>;
  /** CPU cores used by processes outside the bench while the commands were timed */
  foreign_cpu_cores?: number;
}

/** Upper bound of the scenario's run time, for the bench's hard limit. */
export const cliBudgetSec = (o: CliOpts): number => (3 * SETUP_DEADLINE_MS) / 1000 + o.runs * CASES.length * 2;

/** Runs one command line to its exit: its wall time from spawn, its exit code and its stdout. */
function timeRun(
  args: string[],
  cwd: string,
  env: NodeJS.ProcessEnv,
): Promise<{ ms: number; code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const started = performance.now();
    const child = spawn(process.execPath, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    trackChild(child);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
    const timer = setTimeout(() => child.kill('SIGKILL'), RUN_DEADLINE_MS);
    child.once('error', (e) => {
      clearTimeout(timer);
      resolve({ ms: performance.now() - started, code: -1, stdout, stderr: e.message });
    });
    // 'close': the process has exited and its output is complete.
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ ms: performance.now() - started, code, stdout, stderr });
    });
  });
}

/** Logs in to a throwaway emulator and returns the client's environment, holding a valid stored token. */
async function storedToken(o: CliOpts, dir: string): Promise<NodeJS.ProcessEnv> {
  const p = startProc('ours (cli setup)', serveArgs(o.bin, [0, 0], ['--in-memory', '--consent', 'approve']), o.root);
  try {
    const ready = await waitForJsonLine(p, 'base_url', SETUP_DEADLINE_MS);
    const env = {
      ...process.env,
      AGENT_ACCESS_CONFIG_DIR: path.join(dir, 'config'),
      AGENT_ACCESS_BASE_URL: String(ready['base_url']),
      BROWSER: '',
      NO_COLOR: '1',
    };
    const login = await timeRun([o.bin, 'login', '--headless', '--scope', 'ask'], dir, env);
    if (login.code !== 0) throw new BenchError(`login --headless exited with ${login.code}: ${login.stderr}`);
    return env;
  } finally {
    await stopProc(p);
  }
}

export async function measureCli(o: CliOpts, failures: string[]): Promise<CliResults | undefined> {
  const dir = makeTempDir('aa-bench-cli-');
  try {
    log('cli: logging in to a throwaway emulator for a stored token');
    const env = await storedToken(o, dir);
    const token = await timeRun([o.bin, 'token'], dir, env);
    if (token.code !== 0 || !/^ey[\w-]+\.[\w-]+\.[\w-]+\n$/.test(token.stdout))
      throw new BenchError(`token exited with ${token.code}, stdout ${JSON.stringify(token.stdout.slice(0, 200))}: ${token.stderr}`);
    let cases = [...CASES];
    const samples: Record<string, number[]> = Object.fromEntries(cases.map((c) => [c.key, []]));
    const meter = new NoiseMeter();
    for (let round_ = 0; round_ < o.runs; round_++) {
      // Rotate the order each round so drift in machine load is spread across the command lines.
      for (const c of cases.map((_, i) => cases[(i + round_) % cases.length]!)) {
        const r = await timeRun(c.args(o.bin), dir, env);
        // Every run must do its job: the same token each time (no refresh, no network), help and version printed.
        const wrong =
          r.code !== 0
            ? `exited with ${r.code}: ${r.stderr}`
            : c.key === 'token' && r.stdout !== token.stdout
              ? 'printed another token'
              : '';
        if (wrong) {
          failures.push(`cli: ${c.label} ${wrong}`);
          cases = cases.filter((x) => x !== c);
          continue;
        }
        samples[c.key]!.push(r.ms);
        await sleep(20);
      }
      log(`cli round ${round_ + 1}/${o.runs}: ${cases.map((c) => `${c.key}=${round(samples[c.key]!.at(-1)!)}ms`).join(' ')}`);
    }
    const noise = meter.stop();
    const base = median(samples['node'] ?? []);
    const commands: Record<string, CliStats> = {};
    for (const c of CASES) {
      const ms = samples[c.key]!;
      if (ms.length === 0) continue;
      commands[c.key] = {
        label: c.label,
        median_ms: round(median(ms)),
        min_ms: round(Math.min(...ms)),
        max_ms: round(Math.max(...ms)),
        samples_ms: ms.map((x) => round(x)),
        ...(Number.isFinite(base) && base > 0 ? { ratio: round(median(ms) / base, 3) } : {}),
      };
    }
    return { runs: o.runs, commands, ...(noise !== undefined ? { foreign_cpu_cores: round(noise, 2) } : {}) };
  } catch (e) {
    if (!isBenchFailure(e)) throw e;
    failures.push(`cli: ${e.message}`);
    return undefined;
  } finally {
    removeTempDir(dir);
  }
}

export function cliTargets(res: CliResults | undefined): Target[] {
  return CASES.filter((c) => c.target).map((c) => {
    const s = res?.commands[c.key];
    const value = s?.ratio ?? null;
    return {
      name: `cli: ${c.label} / node -e 0`,
      value,
      target: `<= ${TARGET_RATIO}`,
      ok: value === null ? null : value <= TARGET_RATIO,
      ...(s ? { note: `${fmt(s.median_ms)} ms` } : {}),
    };
  });
}

export function cliReport(res: CliResults): string[] {
  const lines = ['', `cli start-up (spawn to exit, median of ${res.runs} interleaved runs; token: a valid stored token)`, '-'.repeat(90)];
  lines.push(`${pad('command line', 26)}${pad('median ms', 11)}${pad('min-max ms', 15)}/ node -e 0`);
  for (const c of CASES) {
    const s = res.commands[c.key];
    if (!s) continue;
    const mark = c.target && s.ratio !== undefined ? `  ${s.ratio <= TARGET_RATIO ? 'met' : 'MISSED'} (<= ${TARGET_RATIO})` : '';
    lines.push(`${pad(s.label, 26)}${pad(fmt(s.median_ms), 11)}${pad(`${fmt(s.min_ms)}-${fmt(s.max_ms)}`, 15)}${fmtRatio(s.ratio)}${mark}`);
  }
  return lines;
}
