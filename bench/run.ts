// Benchmark driver: ready time (spawn -> first 200 on the metadata URL) and token-endpoint throughput
// for bare fastify (ceiling), oauth2-mock-server (the usual mock) and ours.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { FlowError, obtainFamily, type Endpoints } from './flow.js';
import type { LoadConfig, LoadOutput, RunSummary } from './load.js';
import {
  BenchError,
  cleanupSync,
  freePorts,
  installCleanupHandlers,
  makeTempDir,
  median,
  pollUntil200,
  removeTempDir,
  round,
  sleep,
  startProc,
  stopProc,
  trackChild,
  waitForJsonLine,
  type Proc,
} from './util.js';

const HERE = path.dirname(fileURLToPath(import.meta.url)); // build/bench
const ROOT = path.resolve(HERE, '..', '..');
// Override only for exercising the harness against a stand-in server.
const OURS_BIN = process.env['AGENT_ACCESS_BENCH_BIN'] ?? path.join(ROOT, 'bin', 'agent-access.js');
const BARE_JS = path.join(HERE, 'bare-fastify.js');
const LOAD_JS = path.join(HERE, 'load.js');
const RESULTS = path.join(HERE, 'results.json');
const MOCK_DIR = path.join(ROOT, 'node_modules', 'oauth2-mock-server');

// ---------- options ----------

interface Opts {
  only: 'all' | 'baselines' | 'ours';
  skip: Set<'ready' | 'load'>;
  runs: number;
  durationSec: number;
  warmupSec: number;
  connections: number;
}

function parseArgs(argv: string[]): Opts {
  const o: Opts = { only: 'all', skip: new Set(), runs: 15, durationSec: 8, warmupSec: 2, connections: 10 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const v = (): string => {
      const x = argv[++i];
      if (x === undefined) throw new Error(`${a} needs a value`);
      return x;
    };
    if (a === '--only') {
      const x = v();
      if (x !== 'baselines' && x !== 'ours' && x !== 'all') throw new Error('--only baselines|ours|all');
      o.only = x;
    } else if (a === '--skip') {
      const x = v();
      if (x !== 'ready' && x !== 'load') throw new Error('--skip ready|load');
      o.skip.add(x);
    } else if (a === '--runs') o.runs = Math.max(1, Math.min(50, Number(v())));
    else if (a === '--duration') o.durationSec = Math.max(1, Math.min(30, Number(v())));
    else if (a === '--warmup') o.warmupSec = Math.max(1, Math.min(10, Number(v())));
    else if (a === '--connections') o.connections = Math.max(1, Math.min(64, Number(v())));
    else if (a === '--help' || a === '-h') {
      console.log(
        'usage: node build/bench/run.js [--only baselines|ours] [--skip ready|load] [--runs 15] [--duration 8] [--warmup 2] [--connections 10]',
      );
      process.exit(0);
    } else throw new Error(`unknown argument ${a}`);
  }
  return o;
}

const log = (msg: string): void => {
  process.stderr.write(`[bench] ${msg}\n`);
};

// ---------- server specs ----------

function mockBin(): string {
  const pkg = JSON.parse(readFileSync(path.join(MOCK_DIR, 'package.json'), 'utf8')) as {
    bin: string | Record<string, string>;
  };
  const rel = typeof pkg.bin === 'string' ? pkg.bin : Object.values(pkg.bin)[0]!;
  return path.join(MOCK_DIR, rel);
}

interface Spec {
  key: string;
  label: string;
  nPorts: number;
  args: (ports: number[]) => string[];
  metaUrl: (ports: number[]) => string;
}

const bareSpec: Spec = {
  key: 'bare_fastify',
  label: 'bare fastify',
  nPorts: 1,
  args: ([p]) => [BARE_JS, String(p)],
  metaUrl: ([p]) => `http://127.0.0.1:${p}/.well-known/oauth-authorization-server`,
};

const mockSpec: Spec = {
  key: 'oauth2_mock_server',
  label: 'oauth2-mock-server',
  nPorts: 1,
  args: ([p]) => [mockBin(), '-a', '127.0.0.1', '-p', String(p)],
  metaUrl: ([p]) => `http://127.0.0.1:${p}/.well-known/openid-configuration`,
};

function oursSpec(key: string, label: string, storage: () => string[]): Spec {
  return {
    key,
    label,
    nPorts: 2,
    args: ([p, q]) => [OURS_BIN, 'serve', '--port', String(p), '--auth-port', String(q), ...storage(), '--json'],
    metaUrl: ([p]) => `http://127.0.0.1:${p}/.well-known/oauth-authorization-server`,
  };
}

const START_DEADLINE_MS = 20_000;

// ---------- measure A: ready time ----------

interface ReadyOnce {
  ms: number;
  readyLineMs?: number;
}

async function readyOnce(spec: Spec): Promise<ReadyOnce> {
  const ports = await freePorts(spec.nPorts);
  const p = startProc(spec.label, spec.args(ports), ROOT);
  try {
    const ms = await pollUntil200(p, spec.metaUrl(ports), START_DEADLINE_MS, 2);
    return { ms, ...(p.firstLineAt !== undefined ? { readyLineMs: p.firstLineAt } : {}) };
  } finally {
    await stopProc(p);
  }
}

interface ReadyStats {
  median_ms: number;
  min_ms: number;
  max_ms: number;
  samples_ms: number[];
  ready_line_median_ms?: number;
}

function stats(xs: ReadyOnce[]): ReadyStats {
  const ms = xs.map((x) => x.ms);
  const rl = xs.flatMap((x) => (x.readyLineMs !== undefined ? [x.readyLineMs] : []));
  return {
    median_ms: round(median(ms)),
    min_ms: round(Math.min(...ms)),
    max_ms: round(Math.max(...ms)),
    samples_ms: ms.map((x) => round(x)),
    ...(rl.length === xs.length ? { ready_line_median_ms: round(median(rl)) } : {}),
  };
}

interface ReadyResults {
  servers: Record<string, ReadyStats>;
  ours_first_start_ms?: number;
  notes: string[];
}

async function measureReady(o: Opts): Promise<ReadyResults> {
  const specs: Spec[] = [];
  const notes: string[] = [];
  const res: ReadyResults = { servers: {}, notes };
  let stateDir: string | undefined;
  if (o.only !== 'ours') specs.push(bareSpec, mockSpec);
  if (o.only !== 'baselines') {
    // A user's second start: keys and state already on disk.
    stateDir = makeTempDir('aa-bench-ready-');
    const stateFile = path.join(stateDir, 'state.json');
    const warmSpec = oursSpec('ours', 'ours (--state, existing file)', () => ['--state', stateFile]);
    log('ours: first start on a fresh state file');
    const first = await readyOnce(warmSpec);
    res.ours_first_start_ms = round(first.ms);
    if (!existsSync(stateFile)) notes.push(`ours: no state file at ${stateFile} after the first start`);
    else log(`ours: first start ${round(first.ms)} ms, state file ${statSync(stateFile).size} bytes`);
    specs.push(warmSpec);
    specs.push(oursSpec('ours_in_memory', 'ours (--in-memory)', () => ['--in-memory']));
  }
  const samples: Record<string, ReadyOnce[]> = {};
  for (const s of specs) samples[s.key] = [];
  for (let round_ = 0; round_ < o.runs; round_++) {
    // Rotate the order each round so drift in machine load is spread across servers.
    const order = specs.map((_, i) => specs[(i + round_) % specs.length]!);
    for (const s of order) {
      samples[s.key]!.push(await readyOnce(s));
      await sleep(20);
    }
    log(`ready round ${round_ + 1}/${o.runs}: ${order.map((s) => `${s.key}=${round(samples[s.key]!.at(-1)!.ms)}ms`).join(' ')}`);
  }
  for (const s of specs) res.servers[s.key] = stats(samples[s.key]!);
  if (stateDir) removeTempDir(stateDir);
  return res;
}

// ---------- measure B: throughput ----------

async function runLoad(cfg: LoadConfig): Promise<LoadOutput> {
  const child = spawn(process.execPath, [LOAD_JS], { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'] });
  trackChild(child);
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-8000)));
  child.stdin.end(JSON.stringify(cfg));
  const limitMs = (cfg.warmupSec + cfg.durationSec + 40) * 1000;
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

async function startServer(spec: Spec, extraArgs?: (ports: number[]) => string[]): Promise<{ p: Proc; ports: number[] }> {
  const ports = await freePorts(spec.nPorts);
  const p = startProc(spec.label, extraArgs ? extraArgs(ports) : spec.args(ports), ROOT);
  await pollUntil200(p, spec.metaUrl(ports), START_DEADLINE_MS, 5);
  return { p, ports };
}

async function sanityPost(url: string, body: string): Promise<void> {
  const r = await request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body,
    headersTimeout: 10_000,
    bodyTimeout: 10_000,
  });
  const text = await r.body.text();
  if (r.statusCode !== 200) throw new BenchError(`sanity POST ${url} body=${body} -> ${r.statusCode} ${text.slice(0, 500)}`);
}

interface LoadResults {
  bare_fastify_post?: RunSummary;
  mock_refresh_token?: RunSummary;
  mock_client_credentials?: RunSummary;
  ours_refresh?: RunSummary;
  ours_warmup?: RunSummary;
  ours_state_file_bytes?: number;
  flow_warnings: string[];
}

function briefRun(name: string, r: RunSummary): string {
  return `${name}: ${round(r.reqPerSecMean, 0)} req/s, 2xx=${r.total2xx} non2xx=${r.non2xx} errors=${r.errors} timeouts=${r.timeouts} p50=${r.latencyMsP50}ms p99=${r.latencyMsP99}ms`;
}

async function measureLoad(o: Opts, failures: string[]): Promise<LoadResults> {
  const res: LoadResults = { flow_warnings: [] };
  const base = { connections: o.connections, warmupSec: o.warmupSec, durationSec: o.durationSec };

  if (o.only !== 'ours') {
    {
      log('load: bare fastify POST /oauth/token');
      const { p, ports } = await startServer(bareSpec);
      try {
        const origin = `http://127.0.0.1:${ports[0]}`;
        const body = 'grant_type=client_credentials&client_id=bench';
        await sanityPost(`${origin}/oauth/token`, body);
        const r = await runLoad({ ...base, origin, path: '/oauth/token', mode: 'static', body });
        res.bare_fastify_post = r.main;
        log(briefRun('bare fastify POST', r.main));
      } finally {
        await stopProc(p);
      }
    }
    {
      const { p, ports } = await startServer(mockSpec);
      try {
        const origin = `http://127.0.0.1:${ports[0]}`;
        // Same grant as ours (refresh_token); the mock accepts any token and does not rotate or persist.
        const rtBody = `grant_type=refresh_token&refresh_token=${crypto.randomUUID()}&client_id=bench`;
        await sanityPost(`${origin}/token`, rtBody);
        log('load: oauth2-mock-server POST /token grant_type=refresh_token');
        const r1 = await runLoad({ ...base, origin, path: '/token', mode: 'static', body: rtBody });
        res.mock_refresh_token = r1.main;
        log(briefRun('mock refresh_token', r1.main));
        // Its cheapest grant (one JWT signature instead of two), for reference.
        const ccBody = 'grant_type=client_credentials&scope=read';
        await sanityPost(`${origin}/token`, ccBody);
        log('load: oauth2-mock-server POST /token grant_type=client_credentials');
        const r2 = await runLoad({ ...base, origin, path: '/token', mode: 'static', body: ccBody });
        res.mock_client_credentials = r2.main;
        log(briefRun('mock client_credentials', r2.main));
      } finally {
        await stopProc(p);
      }
    }
  }

  if (o.only !== 'baselines') {
    const dir = makeTempDir('aa-bench-load-');
    const stateFile = path.join(dir, 'state.json');
    const spec = oursSpec('ours', 'ours (--state)', () => ['--state', stateFile]);
    const { p } = await startServer(spec);
    try {
      const ready = await waitForJsonLine(p, 'base_url', 5000);
      const baseUrl = String(ready['base_url']);
      const authUrl = String(ready['auth_url'] ?? ready['base_url']);
      const ep: Endpoints = { baseUrl, authUrl };
      const n = o.connections * 2; // fresh chains for warm-up and for the measured run
      log(`ours: minting ${n} refresh-token families via register/authorize/consent/token/refresh (base ${baseUrl}, auth ${authUrl})`);
      const fams = [];
      const t0 = performance.now();
      for (let i = 0; i < n; i++) fams.push(await obtainFamily(ep));
      log(`ours: ${n} families in ${round(performance.now() - t0, 0)} ms`);
      res.flow_warnings = [...new Set(fams.flatMap((f) => f.warnings))];
      for (const w of res.flow_warnings) log(`ours flow warning: ${w}`);
      const tokenUrl = new URL(`${baseUrl.replace(/\/+$/, '')}/oauth/token`);
      log('load: ours POST /oauth/token grant_type=refresh_token (rotating, per-connection chains)');
      const r = await runLoad({
        ...base,
        origin: tokenUrl.origin,
        path: tokenUrl.pathname,
        mode: 'refresh',
        warmupChains: fams.slice(0, o.connections).map((f) => ({ clientId: f.clientId, refreshToken: f.refreshToken })),
        chains: fams.slice(o.connections).map((f) => ({ clientId: f.clientId, refreshToken: f.refreshToken })),
      });
      res.ours_warmup = r.warmup;
      res.ours_refresh = r.main;
      log(briefRun('ours warm-up', r.warmup));
      log(briefRun('ours refresh', r.main));
      for (const [phase, s] of [
        ['warm-up', r.warmup],
        ['measured run', r.main],
      ] as const) {
        if (s.non2xx > 0 || s.errors > 0) {
          const msg =
            `OURS RETURNED ${s.non2xx} NON-2XX (${JSON.stringify(s.statusCodes)}), ${s.errors} errors, ${s.timeouts} timeouts in the ${phase}\n` +
            s.badSamples.map((b) => `    ${b}`).join('\n');
          failures.push(msg);
        }
      }
    } finally {
      await stopProc(p);
      if (p.child.exitCode !== null && p.child.exitCode !== 0) log(`ours exited with code ${p.child.exitCode} after SIGTERM`);
      if (existsSync(stateFile)) res.ours_state_file_bytes = statSync(stateFile).size;
      removeTempDir(dir);
    }
  }
  return res;
}

// ---------- report ----------

interface Target {
  name: string;
  value: number | null;
  target: string;
  ok: boolean | null;
}

function fmt(x: number | undefined | null, d = 1): string {
  return x === undefined || x === null || Number.isNaN(x) ? '-' : round(x, d).toString();
}

function pad(s: string, n: number): string {
  return s.length >= n ? s : s + ' '.repeat(n - s.length);
}

async function main(): Promise<void> {
  const o = parseArgs(process.argv.slice(2));
  installCleanupHandlers(330_000);
  const started = performance.now();
  if (o.only !== 'baselines' && !existsSync(OURS_BIN)) throw new BenchError(`${OURS_BIN} not found (is the server built?)`);
  const failures: string[] = [];

  const ready = o.skip.has('ready') ? undefined : await measureReady(o);
  let load: LoadResults | undefined;
  try {
    load = o.skip.has('load') ? undefined : await measureLoad(o, failures);
  } catch (e) {
    if (e instanceof FlowError) failures.push(`ours: token-family flow failed\n${e.message}`);
    else throw e;
  }

  const r = ready?.servers ?? {};
  const oursReady = r['ours']?.median_ms;
  const bareReady = r['bare_fastify']?.median_ms;
  const mockReady = r['oauth2_mock_server']?.median_ms;
  const oursRps = load?.ours_refresh?.reqPerSecMean;
  const mockRtRps = load?.mock_refresh_token?.reqPerSecMean;
  const mockCcRps = load?.mock_client_credentials?.reqPerSecMean;

  const ratio = (a?: number, b?: number): number | null => (a !== undefined && b !== undefined && b > 0 ? a / b : null);
  const t1 = ratio(oursReady, bareReady);
  const t2 = ratio(oursReady, mockReady);
  const t3 = ratio(oursRps, mockRtRps);
  const t4 = ratio(oursRps, mockCcRps);
  const targets: Target[] = [
    { name: 'ours ready / bare fastify ready', value: t1, target: '<= 1.5', ok: t1 === null ? null : t1 <= 1.5 },
    { name: 'ours ready / oauth2-mock-server ready', value: t2, target: '< 1', ok: t2 === null ? null : t2 < 1 },
    { name: 'ours refresh req/s / mock refresh_token req/s', value: t3, target: '>= 4', ok: t3 === null ? null : t3 >= 4 },
    { name: '  (same vs mock client_credentials, stricter)', value: t4, target: '>= 4', ok: t4 === null ? null : t4 >= 4 },
  ];

  const rows: [string, string, string, string][] = [
    ['bare fastify (ceiling)', fmt(bareReady), fmt(load?.bare_fastify_post?.reqPerSecMean, 0), 'POST /oauth/token (trivial JSON)'],
    ['oauth2-mock-server', fmt(mockReady), fmt(mockRtRps, 0), 'POST /token grant_type=refresh_token'],
    ['', '', fmt(mockCcRps, 0), 'POST /token grant_type=client_credentials'],
    ['ours (--state file)', fmt(oursReady), fmt(oursRps, 0), 'POST /oauth/token refresh_token, rotating'],
  ];
  const lines: string[] = [];
  lines.push('');
  lines.push(`agent-access bench  node ${process.version}  ${os.cpus().length} cpus  ready: median of ${o.runs}  load: ${o.connections} conns, ${o.warmupSec}s warm-up + ${o.durationSec}s`);
  lines.push('');
  lines.push(`${pad('server', 26)}${pad('ready ms', 11)}${pad('req/s', 10)}what was loaded`);
  lines.push('-'.repeat(90));
  for (const [a, b, c, d] of rows) lines.push(`${pad(a, 26)}${pad(b, 11)}${pad(c, 10)}${d}`);
  if (ready?.ours_first_start_ms !== undefined) lines.push(`${pad('  ours first start', 26)}${pad(fmt(ready.ours_first_start_ms), 11)}(fresh state file, informational)`);
  if (r['ours_in_memory']) lines.push(`${pad('  ours --in-memory', 26)}${pad(fmt(r['ours_in_memory'].median_ms), 11)}(informational)`);
  if (r['ours']?.ready_line_median_ms !== undefined) lines.push(`${pad('  ours ready line', 26)}${pad(fmt(r['ours'].ready_line_median_ms), 11)}(first stdout line, informational)`);
  if (load?.ours_refresh) {
    const s = load.ours_refresh;
    lines.push(`${pad('  ours non-2xx', 26)}${pad(String(s.non2xx), 11)}errors ${s.errors}, timeouts ${s.timeouts}, p50 ${s.latencyMsP50} ms, p99 ${s.latencyMsP99} ms`);
  }
  lines.push('');
  lines.push('targets');
  lines.push('-'.repeat(90));
  for (const t of targets) {
    const mark = t.ok === null ? 'n/a' : t.ok ? 'ok' : 'MISSED';
    lines.push(`${pad(t.name, 50)}${pad(fmt(t.value, 2), 8)}${pad(t.target, 8)}${mark}`);
  }
  for (const n of ready?.notes ?? []) lines.push(`note: ${n}`);
  for (const w of load?.flow_warnings ?? []) lines.push(`flow warning: ${w}`);
  lines.push(`total bench time ${round((performance.now() - started) / 1000, 0)} s`);
  console.log(lines.join('\n'));

  mkdirSync(HERE, { recursive: true });
  const results = {
    date: new Date().toISOString(),
    node: process.version,
    cpus: os.cpus().length,
    config: { runs: o.runs, connections: o.connections, warmup_s: o.warmupSec, duration_s: o.durationSec, only: o.only, skip: [...o.skip] },
    ready,
    throughput: load,
    targets: targets.map((t) => ({ ...t, value: t.value === null ? null : round(t.value, 3) })),
    failures,
  };
  writeFileSync(RESULTS, JSON.stringify(results, null, 2) + '\n');
  console.log(`results written to ${path.relative(ROOT, RESULTS)}`);

  if (failures.length > 0) {
    console.error('\n' + '!'.repeat(90));
    for (const f of failures) console.error(`BENCH FAILURE: ${f}`);
    console.error('!'.repeat(90));
    process.exitCode = 1;
  }
}

main().catch((err: unknown) => {
  console.error(`\n[bench] FAILED: ${err instanceof Error ? err.message : String(err)}`);
  if (!(err instanceof BenchError) && err instanceof Error && err.stack) console.error(err.stack);
  cleanupSync();
  process.exit(1);
});
