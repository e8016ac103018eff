// Benchmark driver: ready time (spawn -> first 200 on the metadata URL) and three load scenarios:
//   refresh: token-endpoint throughput for bare fastify (ceiling), oauth2-mock-server (the usual mock) and ours;
//   ask:     POST /chat/ask on ours (fresh and idempotent replay) against bare fastify + ES256 jwtVerify;
//   storage: ours on states of about 1k and 100k records (start, refresh, peak RSS) and a mixed soak (storage.ts);
//   cli:     start-up of `agent-access --help`, `--version` and `token` against `node -e 0` (cli.ts).
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Agent, request } from 'undici';
import { cliBudgetSec, cliReport, cliTargets, measureCli, type CliOpts } from './cli.js';
import { obtainFamily, type Endpoints } from './flow.js';
import type { RunSummary } from './load.js';
import { MAX_LIST_ITEMS } from './scenario-gen.js';
import { DEFAULT_SIZES, measureStorage, storageBudgetSec, storageReport, storageTargets, type StorageOpts } from './storage.js';
import {
  BenchError,
  briefRun,
  cleanupSync,
  cpuBusyCores,
  fmt,
  fmtRatio,
  freePorts,
  installCleanupHandlers,
  isBenchFailure,
  log,
  makeTempDir,
  NoiseMeter,
  median,
  pad,
  pollUntil200,
  removeTempDir,
  round,
  runLoad,
  serveArgs,
  sleep,
  startProc,
  peakRssKb,
  stopProc,
  waitForJsonLine,
  waitForJsonLineTimed,
  type Proc,
  type Target,
} from './util.js';

const HERE = path.dirname(fileURLToPath(import.meta.url)); // build/bench
const ROOT = path.resolve(HERE, '..', '..');
// Override only for exercising the harness against a stand-in server.
const OURS_BIN = process.env['AGENT_ACCESS_BENCH_BIN'] ?? path.join(ROOT, 'bin', 'agent-access.js');
const BARE_JS = path.join(HERE, 'bare-fastify.js');
const BARE_VERIFY_JS = path.join(HERE, 'bare-verify.js');
const RESULTS = path.join(HERE, 'results.json');
const MOCK_DIR = path.join(ROOT, 'node_modules', 'oauth2-mock-server');

// ---------- options ----------

type Scenario = 'all' | 'refresh' | 'ask' | 'storage' | 'cli';

interface Opts {
  only: 'all' | 'baselines' | 'ours';
  scenario: Scenario;
  skip: Set<'ready' | 'load'>;
  runs: number;
  durationSec: number;
  warmupSec: number;
  connections: number;
  quietWaitSec: number;
  /** scenario storage: records of the generated scenarios, starts timed per size, soak length and write rate */
  storageSizes: number[];
  storageStarts: number;
  storageDurationSec: number;
  soakSec: number;
  soakWriteRate: number;
}

const runsRefresh = (o: Opts): boolean => o.scenario === 'all' || o.scenario === 'refresh';
const runsAsk = (o: Opts): boolean => o.scenario === 'all' || o.scenario === 'ask';
const runsStorage = (o: Opts): boolean =>
  (o.scenario === 'all' || o.scenario === 'storage') && o.only !== 'baselines' && !o.skip.has('load');
const runsCli = (o: Opts): boolean => (o.scenario === 'all' || o.scenario === 'cli') && o.only !== 'baselines';

/** Other processes using more than this many cores counts as a noisy machine. */
const QUIET_CORES = 0.3;

function parseArgs(argv: string[]): Opts {
  const o: Opts = {
    only: 'all',
    scenario: 'all',
    skip: new Set(),
    runs: 15,
    durationSec: 8,
    warmupSec: 2,
    connections: 10,
    quietWaitSec: 60,
    storageSizes: DEFAULT_SIZES,
    storageStarts: 5,
    storageDurationSec: 20,
    soakSec: 60,
    soakWriteRate: 200,
  };
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
    } else if (a === '--scenario') {
      const x = v();
      if (x !== 'refresh' && x !== 'ask' && x !== 'storage' && x !== 'cli' && x !== 'all')
        throw new Error('--scenario refresh|ask|storage|cli|all');
      o.scenario = x;
    } else if (a === '--skip') {
      const x = v();
      if (x !== 'ready' && x !== 'load') throw new Error('--skip ready|load');
      o.skip.add(x);
    } else if (a === '--runs') o.runs = Math.max(1, Math.min(50, Number(v())));
    else if (a === '--duration') o.durationSec = Math.max(1, Math.min(30, Number(v())));
    else if (a === '--warmup') o.warmupSec = Math.max(1, Math.min(10, Number(v())));
    else if (a === '--connections') o.connections = Math.max(1, Math.min(64, Number(v())));
    else if (a === '--quiet-wait') o.quietWaitSec = Math.max(0, Math.min(120, Number(v())));
    else if (a === '--storage-sizes') {
      const xs = v().split(',').map(Number);
      if (xs.some((x) => !Number.isInteger(x) || x < 100 || x > 4 * MAX_LIST_ITEMS))
        throw new Error(`--storage-sizes N,N,... (records, 100..${4 * MAX_LIST_ITEMS})`);
      o.storageSizes = xs.sort((x, y) => x - y);
    } else if (a === '--storage-starts') o.storageStarts = Math.max(1, Math.min(15, Number(v())));
    else if (a === '--storage-duration') o.storageDurationSec = Math.max(1, Math.min(120, Number(v())));
    else if (a === '--soak') o.soakSec = Math.max(0, Math.min(600, Number(v())));
    else if (a === '--soak-rate') o.soakWriteRate = Math.max(1, Math.min(5000, Number(v())));
    else if (a === '--help' || a === '-h') {
      console.log(
        'usage: node build/bench/run.js [--scenario refresh|ask|storage|cli|all] [--only baselines|ours] [--skip ready|load] [--runs 15] [--duration 8] ' +
          '[--warmup 2] [--connections 10] [--quiet-wait 60]\n' +
          '                                [--storage-sizes 1000,100000] [--storage-starts 5] [--storage-duration 20] [--soak 60] [--soak-rate 200]\n' +
          '  --scenario picks the load scenario(s) (default all); the ready-time phase is governed by --skip ready only.\n' +
          '  storage: scenarios of --storage-sizes records, each loaded into a state file once, then --storage-starts timed\n' +
          '  second starts per size; then the refresh load on one server per size: a run-in of each, then windows taken\n' +
          "  in turns (each a --warmup, then half of --storage-duration s), and each server's peak RSS; then a --soak s\n" +
          '  mixed run (0: none) on a new state of the smallest size: keyed asks and research jobs offered at --soak-rate /s\n' +
          '  beside the refreshes. --skip load skips it too.\n' +
          '  cli: --runs interleaved spawns to exit of node -e 0, agent-access --help, --version and token (a valid stored token).',
      );
      process.exit(0);
    } else throw new Error(`unknown argument ${a}`);
  }
  return o;
}

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
  /** prints a JSON ready line with this key on stdout */
  readyLineKey?: string;
  /** added to the bench's environment */
  env?: NodeJS.ProcessEnv;
}

const bareSpec: Spec = {
  key: 'bare_fastify',
  label: 'bare fastify',
  nPorts: 1,
  args: ([p]) => [BARE_JS, String(p)],
  metaUrl: ([p]) => `http://127.0.0.1:${p}/.well-known/oauth-authorization-server`,
};

const bareVerifySpec: Spec = {
  key: 'bare_verify',
  label: 'bare fastify + jwtVerify',
  nPorts: 1,
  args: ([p]) => [BARE_VERIFY_JS, String(p)],
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
    args: (ports) => serveArgs(OURS_BIN, ports, storage()),
    metaUrl: ([p]) => `http://127.0.0.1:${p}/.well-known/oauth-authorization-server`,
    readyLineKey: 'base_url',
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
  const p = startProc(spec.label, spec.args(ports), ROOT, spec.env && { ...process.env, ...spec.env });
  try {
    const ms = await pollUntil200(p, spec.metaUrl(ports), START_DEADLINE_MS, 2);
    if (spec.readyLineKey === undefined) return { ms };
    const line = await waitForJsonLineTimed(p, spec.readyLineKey, 3000);
    return { ms, readyLineMs: line.atMs };
  } finally {
    await stopProc(p);
  }
}

// ---------- measure A2: the first requests after the ready line ----------

/**
 * Sequential requests on one keep-alive connection right after the ready line, and the same ten again on a new
 * connection once the server is long warm. The first of each pays for its connection (client and server), which no
 * warm-up can take away: a server long warm answers its tenth three to four times as fast as its first. So the target
 * compares the first request after the ready line with the first once warm, made the same way; what the first pays
 * over that is warm-up left in the request path.
 *
 * The same way includes the client's: a client that has been idle pays more for its first request, whatever the
 * server (about 0.2 ms here). Before the first once warm, the bench has been sending a request every 2 ms; so while
 * it waits for the ready line it sends one every 2 ms too, to the pacer, a server of its own.
 */
interface AfterReadyOnce {
  /** ms of request 1 .. 10, sent one after another from the moment the ready line was read */
  first10_ms: number[];
  /** the slowest request of those sent one after another for AFTER_READY_WINDOW_MS after the tenth */
  window_max_ms: number;
  window_requests: number;
  /** ms of request 1 .. 10 on a new connection once the window is over: the server long warm, and busy until then */
  warm10_ms: number[];
}

/** How long after the tenth request the bench keeps asking: the time the emulator loads the rest in the background. */
const AFTER_READY_WINDOW_MS = 1_000;

async function afterReadyOnce(spec: Spec, pace: () => Promise<unknown>): Promise<AfterReadyOnce> {
  const ports = await freePorts(spec.nPorts);
  const p = startProc(spec.label, spec.args(ports), ROOT);
  const agent = new Agent({ connections: 1, pipelining: 1 });
  try {
    await waitForJsonLineTimed(p, spec.readyLineKey ?? 'base_url', START_DEADLINE_MS, pace);
    const url = spec.metaUrl(ports);
    const timed = async (dispatcher: Agent = agent): Promise<number> => {
      const t0 = performance.now();
      const r = await request(url, { dispatcher, headersTimeout: 10_000, bodyTimeout: 10_000 });
      await r.body.text();
      if (r.statusCode !== 200) throw new BenchError(`${spec.label}: ${url} answered ${r.statusCode} after the ready line`);
      return performance.now() - t0;
    };
    const first10_ms: number[] = [];
    for (let i = 0; i < 10; i++) first10_ms.push(await timed());
    let window_max_ms = 0;
    let window_requests = 0;
    for (const end = performance.now() + AFTER_READY_WINDOW_MS; performance.now() < end; window_requests++) {
      window_max_ms = Math.max(window_max_ms, await timed());
      await sleep(2);
    }
    const warm = new Agent({ connections: 1, pipelining: 1 });
    const warm10_ms: number[] = [];
    try {
      for (let i = 0; i < 10; i++) warm10_ms.push(await timed(warm));
    } finally {
      await warm.close();
    }
    return { first10_ms, window_max_ms, window_requests, warm10_ms };
  } finally {
    await agent.close();
    await stopProc(p);
  }
}

interface AfterReadyStats {
  first_median_ms: number;
  tenth_median_ms: number;
  /** median over the starts of the slowest request in the window after the tenth */
  window_max_median_ms: number;
  window_max_ms: number;
  /** medians of the first and the tenth request on a new connection to the same server after the window */
  warm_first_median_ms: number;
  warm_tenth_median_ms: number;
  samples: AfterReadyOnce[];
}

function afterReadyStats(xs: AfterReadyOnce[]): AfterReadyStats {
  return {
    first_median_ms: round(median(xs.map((x) => x.first10_ms[0]!)), 2),
    tenth_median_ms: round(median(xs.map((x) => x.first10_ms[9]!)), 2),
    window_max_median_ms: round(median(xs.map((x) => x.window_max_ms)), 2),
    window_max_ms: round(Math.max(...xs.map((x) => x.window_max_ms)), 2),
    warm_first_median_ms: round(median(xs.map((x) => x.warm10_ms[0]!)), 2),
    warm_tenth_median_ms: round(median(xs.map((x) => x.warm10_ms[9]!)), 2),
    samples: xs.map((x) => ({
      ...x,
      first10_ms: x.first10_ms.map((m) => round(m, 2)),
      window_max_ms: round(x.window_max_ms, 2),
      warm10_ms: x.warm10_ms.map((m) => round(m, 2)),
    })),
  };
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
  /** ours on its existing state file: the first ten requests after the ready line, the second after them, then ten on a new connection */
  ours_after_ready?: AfterReadyStats;
  /** the same for bare fastify, which warms nothing up before it listens: what the measure shows of a server that does not */
  bare_after_ready?: AfterReadyStats;
  notes: string[];
  /** CPU cores used by processes outside the bench during this phase */
  foreign_cpu_cores?: number;
}

async function measureReady(o: Opts, failures: string[]): Promise<ReadyResults> {
  let specs: Spec[] = [];
  const notes: string[] = [];
  const res: ReadyResults = { servers: {}, notes };
  const meter = new NoiseMeter();
  let stateDir: string | undefined;
  if (o.only !== 'ours') specs.push(bareSpec, mockSpec);
  if (o.only !== 'baselines') {
    // A user's second start: keys and state already on disk.
    stateDir = makeTempDir('aa-bench-ready-');
    const stateFile = path.join(stateDir, 'state.json');
    const warmSpec = oursSpec('ours', 'ours (--state, existing file)', () => ['--state', stateFile]);
    log('ours: first start on a fresh state file');
    try {
      const first = await readyOnce(warmSpec);
      res.ours_first_start_ms = round(first.ms);
      if (!existsSync(stateFile)) notes.push(`ours: no state file at ${stateFile} after the first start`);
      else log(`ours: first start ${round(first.ms)} ms, state file ${statSync(stateFile).size} bytes`);
      specs.push(warmSpec);
      specs.push(oursSpec('ours_in_memory', 'ours (--in-memory)', () => ['--in-memory']));
      // The start after an install or upgrade, before a run has left Node's compile cache (bin/agent-access.js).
      specs.push({
        ...oursSpec('ours_no_compile_cache', 'ours (--state, no compile cache)', () => ['--state', stateFile]),
        env: { NODE_DISABLE_COMPILE_CACHE: '1' },
      });
    } catch (e) {
      if (!isBenchFailure(e)) throw e;
      failures.push(`ours failed to start (first start, fresh state file): ${e.message}`);
    }
  }
  const samples: Record<string, ReadyOnce[]> = {};
  for (const s of specs) samples[s.key] = [];
  const afterReady: AfterReadyOnce[] = [];
  const bareAfterReady: AfterReadyOnce[] = [];
  const oursOnFile = specs.find((s) => s.key === 'ours');
  const bare = specs.find((s) => s.key === 'bare_fastify');
  // The pacer (AfterReadyOnce): idle, and so not in the way, but for the requests sent while waiting for a ready line.
  // Without it the first requests after the ready line are not measured: the client's state would differ.
  let pacer: Awaited<ReturnType<typeof startServer>> | undefined;
  if (oursOnFile || bare) {
    try {
      pacer = await startServer(bareSpec);
    } catch (e) {
      if (!isBenchFailure(e)) throw e;
      failures.push(`the pacer (bare fastify) failed to start; the requests after the ready line were not measured: ${e.message}`);
    }
  }
  const pacerAgent = new Agent({ connections: 1, pipelining: 1 });
  const pace = async (): Promise<void> => {
    if (!pacer) return;
    try {
      const r = await request(bareSpec.metaUrl(pacer.ports), { dispatcher: pacerAgent, headersTimeout: 10_000, bodyTimeout: 10_000 });
      await r.body.text();
    } catch (e) {
      throw new BenchError(`the pacer (bare fastify) did not answer: ${(e as Error).message}`);
    }
  };
  try {
    for (let round_ = 0; round_ < o.runs && specs.length > 0; round_++) {
      // Rotate the order each round so drift in machine load is spread across servers.
      const order = specs.map((_, i) => specs[(i + round_) % specs.length]!);
      const done: string[] = [];
      for (const s of order) {
        try {
          samples[s.key]!.push(await readyOnce(s));
          done.push(`${s.key}=${round(samples[s.key]!.at(-1)!.ms)}ms`);
        } catch (e) {
          if (!isBenchFailure(e)) throw e;
          failures.push(`${s.label} failed to start (ready run ${round_ + 1}): ${e.message}`);
          specs = specs.filter((x) => x !== s);
        }
        await sleep(20);
      }
      for (const [spec, xs] of [
        [oursOnFile, afterReady],
        [bare, bareAfterReady],
      ] as const) {
        if (!spec || !specs.includes(spec) || !pacer) continue;
        try {
          const x = await afterReadyOnce(spec, pace);
          xs.push(x);
          done.push(`${spec.key}_after_ready=${round(x.first10_ms[0]!, 2)}/${round(x.first10_ms[9]!, 2)}/${round(x.window_max_ms, 1)}ms`);
        } catch (e) {
          if (!isBenchFailure(e)) throw e;
          failures.push(`${spec.label} after the ready line (run ${round_ + 1}): ${e.message}`);
        }
      }
      log(`ready round ${round_ + 1}/${o.runs}: ${done.join(' ')}`);
    }
  } finally {
    await pacerAgent.close();
    if (pacer) await stopProc(pacer.p);
  }
  for (const [key, xs] of Object.entries(samples)) if (xs.length > 0) res.servers[key] = stats(xs);
  if (afterReady.length > 0) res.ours_after_ready = afterReadyStats(afterReady);
  if (bareAfterReady.length > 0) res.bare_after_ready = afterReadyStats(bareAfterReady);
  if (stateDir) removeTempDir(stateDir);
  const noise = meter.stop();
  if (noise !== undefined) res.foreign_cpu_cores = round(noise, 2);
  return res;
}

// ---------- measure B: throughput ----------

async function startServer(spec: Spec, extraArgs?: (ports: number[]) => string[]): Promise<{ p: Proc; ports: number[] }> {
  const ports = await freePorts(spec.nPorts);
  const p = startProc(spec.label, extraArgs ? extraArgs(ports) : spec.args(ports), ROOT);
  try {
    await pollUntil200(p, spec.metaUrl(ports), START_DEADLINE_MS, 5);
  } catch (e) {
    await stopProc(p);
    throw e;
  }
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

interface AskInfo {
  /** extra server arguments used for the ask scenario */
  server_args: string[];
  fresh_sample?: string;
  replay_sample?: string;
  /** RateLimit-* headers seen on the sanity requests, for information */
  rate_limit_headers?: Record<string, string>;
  warnings: string[];
}

interface LoadResults {
  bare_fastify_post?: RunSummary;
  bare_verify_ask?: RunSummary;
  bare_verify_warmup?: RunSummary;
  ours_ask_replay?: RunSummary;
  ours_ask_replay_warmup?: RunSummary;
  ours_ask_fresh?: RunSummary;
  ours_ask_fresh_warmup?: RunSummary;
  ours_ask?: AskInfo;
  /** body size of one sanity response per server/variant (the load compares servers answering different sizes) */
  ask_response_bytes?: Record<string, number>;
  mock_refresh_token?: RunSummary;
  mock_client_credentials?: RunSummary;
  ours_refresh?: RunSummary;
  ours_warmup?: RunSummary;
  ours_state_file_bytes?: number;
  flow_warnings: string[];
  /** CPU cores used by processes outside the bench during each load phase */
  foreign_cpu_cores: Record<string, number>;
  /** VmHWM of each server over its load phases (start-up included), read just before it is stopped */
  peak_rss_kb: Record<string, number | undefined>;
}

async function measureLoad(o: Opts, failures: string[]): Promise<LoadResults> {
  const res: LoadResults = { flow_warnings: [], foreign_cpu_cores: {}, peak_rss_kb: {} };
  const noteNoise = (key: string, m: NoiseMeter): void => {
    const n = m.stop();
    if (n !== undefined) res.foreign_cpu_cores[key] = round(n, 2);
  };
  const base = { connections: o.connections, warmupSec: o.warmupSec, durationSec: o.durationSec };
  // A server that fails is reported and the others are still measured.
  const guarded = async (what: string, fn: () => Promise<void>): Promise<void> => {
    try {
      await fn();
    } catch (e) {
      if (!isBenchFailure(e)) throw e;
      failures.push(`${what}: ${e.message}`);
    }
  };

  if (o.only !== 'ours' && runsRefresh(o)) {
    await guarded('load on bare fastify', async () => {
      log('load: bare fastify POST /oauth/token');
      const meter = new NoiseMeter();
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
        noteNoise('bare_fastify', meter);
      }
    });
    await guarded('load on oauth2-mock-server', async () => {
      const meter = new NoiseMeter();
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
        res.peak_rss_kb['oauth2_mock_server'] = peakRssKb(p.child.pid!);
        await stopProc(p);
        noteNoise('oauth2_mock_server', meter);
      }
    });
  }

  if (o.only !== 'baselines' && runsRefresh(o))
    await guarded('ours (load)', async () => {
      const meter = new NoiseMeter();
      const { p, dir, stateFile, baseUrl, authUrl } = await startOursOnTempState('ours (--state)', 'aa-bench-load-', []);
      try {
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
        res.peak_rss_kb['ours_refresh'] = peakRssKb(p.child.pid!);
        await stopProc(p);
        if (p.child.exitCode !== null && p.child.exitCode !== 0) log(`ours exited with code ${p.child.exitCode} after SIGTERM`);
        if (existsSync(stateFile)) res.ours_state_file_bytes = statSync(stateFile).size;
        removeTempDir(dir);
        noteNoise('ours', meter);
      }
    });

  if (runsAsk(o)) await measureAsk(o, res, guarded, noteNoise, failures);
  return res;
}

// ---------- scenario "ask": POST /chat/ask ----------

const ASK_BODY = JSON.stringify({ question: 'Wann kommt der Hufschmied?' });
const REPLAY_KEY = 'bench-replay-1';
const ASK_RATE_LIMIT = ['--rate-limit', '1000000/min'];

interface AskReply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

async function postAsk(url: string, token: string | undefined, idemKey?: string): Promise<AskReply> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (token !== undefined) headers['authorization'] = `Bearer ${token}`;
  if (idemKey !== undefined) headers['idempotency-key'] = idemKey;
  const r = await request(url, { method: 'POST', headers, body: ASK_BODY, headersTimeout: 30_000, bodyTimeout: 30_000 });
  return { status: r.statusCode, headers: r.headers, text: await r.body.text() };
}

function describeAsk(url: string, token: string | undefined, idemKey: string | undefined, r: AskReply): string {
  const req = [
    `POST ${url}`,
    ...(token !== undefined ? [`authorization: Bearer ${token}`] : []),
    'content-type: application/json',
    ...(idemKey !== undefined ? [`idempotency-key: ${idemKey}`] : []),
    `body: ${ASK_BODY}`,
  ];
  return (
    `\n    request:\n      ${req.join('\n      ')}\n    response: ${r.status}\n      headers: ${JSON.stringify(r.headers)}\n      body: ` +
    `${r.text.slice(0, 2000)}`
  );
}

/** Problems with the 2.4 answer shape {answer, sources, message_id}; [] when fine. */
function answerProblems(text: string): { problems: string[]; messageId?: string } {
  let j: unknown;
  try {
    j = JSON.parse(text);
  } catch {
    return { problems: ['body is not JSON'] };
  }
  if (j === null || typeof j !== 'object' || Array.isArray(j)) return { problems: ['body is not a JSON object'] };
  const o = j as Record<string, unknown>;
  const problems: string[] = [];
  if (typeof o['answer'] !== 'string') problems.push('answer is not a string');
  if (!Array.isArray(o['sources'])) problems.push('sources is not an array');
  if (typeof o['message_id'] !== 'string') problems.push('message_id is not a string');
  return { problems, ...(typeof o['message_id'] === 'string' ? { messageId: o['message_id'] } : {}) };
}

/** Starts ours on a fresh temp state file and waits for its ready line; the caller stops it and removes `dir`. */
async function startOursOnTempState(
  label: string,
  tmpPrefix: string,
  extraArgs: string[],
): Promise<{ p: Proc; dir: string; stateFile: string; baseUrl: string; authUrl: string }> {
  const dir = makeTempDir(tmpPrefix);
  const stateFile = path.join(dir, 'state.json');
  let p: Proc;
  try {
    p = (await startServer(oursSpec('ours', label, () => ['--state', stateFile, ...extraArgs]))).p;
  } catch (e) {
    removeTempDir(dir);
    throw e;
  }
  try {
    const ready = await waitForJsonLine(p, 'base_url', 5000);
    const baseUrl = String(ready['base_url']).replace(/\/+$/, '');
    return { p, dir, stateFile, baseUrl, authUrl: typeof ready['auth_url'] === 'string' ? ready['auth_url'] : baseUrl };
  } catch (e) {
    await stopProc(p);
    removeTempDir(dir);
    throw e;
  }
}

function checkRun(failures: string[], who: string, phase: string, s: RunSummary): void {
  if (s.non2xx > 0 || s.errors > 0 || s.bodyMismatches > 0) {
    failures.push(
      `${who} RETURNED ${s.non2xx} NON-2XX (${JSON.stringify(s.statusCodes)}), ${s.errors} errors, ${s.timeouts} timeouts, ` +
        `${s.bodyMismatches} replay bodies differing from the stored one in the ${phase}\n` +
        s.badSamples.map((b) => `    ${b}`).join('\n'),
    );
  }
}

async function measureAsk(
  o: Opts,
  res: LoadResults,
  guarded: (what: string, fn: () => Promise<void>) => Promise<void>,
  noteNoise: (key: string, m: NoiseMeter) => void,
  failures: string[],
): Promise<void> {
  const base = { connections: o.connections, warmupSec: o.warmupSec, durationSec: o.durationSec };

  if (o.only !== 'ours')
    await guarded('load on bare fastify + jwtVerify (ask)', async () => {
      const meter = new NoiseMeter();
      const { p, ports } = await startServer(bareVerifySpec);
      try {
        const ready = await waitForJsonLine(p, 'token', 5000);
        const token = String(ready['token']);
        const origin = `http://127.0.0.1:${ports[0]}`;
        const url = `${origin}/chat/ask`;
        const anon = await postAsk(url, undefined);
        if (anon.status !== 401)
          throw new BenchError(`bare verify: expected 401 without a token${describeAsk(url, undefined, undefined, anon)}`);
        const ok = await postAsk(url, token);
        if (ok.status !== 200 || answerProblems(ok.text).problems.length > 0)
          throw new BenchError(`bare verify: sanity ask failed${describeAsk(url, token, undefined, ok)}`);
        (res.ask_response_bytes ??= {})['bare_verify'] = Buffer.byteLength(ok.text);
        log('load: bare fastify + jwtVerify POST /chat/ask');
        const r = await runLoad({
          ...base,
          origin,
          path: '/chat/ask',
          mode: 'static',
          body: ASK_BODY,
          contentType: 'application/json',
          headers: { authorization: `Bearer ${token}` },
        });
        res.bare_verify_warmup = r.warmup;
        res.bare_verify_ask = r.main;
        log(briefRun('bare verify ask', r.main));
        checkRun(failures, 'BARE VERIFY', 'measured run', r.main);
      } finally {
        await stopProc(p);
        noteNoise('bare_verify', meter);
      }
    });

  if (o.only !== 'baselines')
    await guarded('ours ask (load)', async () => {
      const meter = new NoiseMeter();
      const info: AskInfo = { server_args: ASK_RATE_LIMIT, warnings: [] };
      res.ours_ask = info;
      const { p, dir, baseUrl, authUrl } = await startOursOnTempState('ours (--state, ask)', 'aa-bench-ask-', info.server_args);
      try {
        const fam = await obtainFamily({ baseUrl, authUrl });
        for (const w of fam.warnings) info.warnings.push(`flow: ${w}`);
        if (fam.accessToken === '') throw new BenchError('ours: the refresh response carried no access_token');
        const token = fam.accessToken;
        const url = `${baseUrl}/chat/ask`;
        const askUrl = new URL(url);

        // Sanity: route present, answer shape, fresh calls are distinct, replays byte for byte.
        const anon = await postAsk(url, undefined);
        if (anon.status === 404)
          throw new BenchError(`ours does not serve POST /chat/ask yet (404)${describeAsk(url, undefined, undefined, anon)}`);
        if (anon.status !== 401) info.warnings.push(`no token: expected 401, got ${anon.status}: ${anon.text.slice(0, 300)}`);
        else if (!/ask/.test(String(anon.headers['www-authenticate'] ?? '')))
          info.warnings.push(
            `no token: 401 without a WWW-Authenticate naming the scope (got ${JSON.stringify(anon.headers['www-authenticate'])})`,
          );
        const fresh: AskReply[] = [];
        for (let i = 0; i < 2; i++) {
          const r = await postAsk(url, token);
          const { problems } = answerProblems(r.text);
          if (r.status !== 200 || problems.length > 0)
            throw new BenchError(
              `ours: fresh ask ${i + 1} failed${problems.length ? ` (${problems.join(', ')})` : ''}${describeAsk(url, token, undefined, r)}`,
            );
          fresh.push(r);
        }
        info.fresh_sample = fresh[0]!.text.slice(0, 2000);
        const rl: Record<string, string> = {};
        for (const h of ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'ratelimit', 'ratelimit-policy']) {
          const v = fresh[1]!.headers[h];
          if (v !== undefined) rl[h] = String(v);
        }
        if (Object.keys(rl).length > 0) info.rate_limit_headers = rl;
        const [m1, m2] = fresh.map((r) => answerProblems(r.text).messageId);
        if (m1 === m2) info.warnings.push(`two fresh asks (no Idempotency-Key) returned the same message_id ${m1}`);
        const rec = await postAsk(url, token, REPLAY_KEY);
        if (rec.status !== 200 || answerProblems(rec.text).problems.length > 0)
          throw new BenchError(`ours: first ask with Idempotency-Key failed${describeAsk(url, token, REPLAY_KEY, rec)}`);
        const rep = await postAsk(url, token, REPLAY_KEY);
        if (rep.status !== 200) throw new BenchError(`ours: replay failed${describeAsk(url, token, REPLAY_KEY, rep)}`);
        if (rep.text !== rec.text)
          failures.push(
            `ours: replay body differs from the stored response\n  first call:${describeAsk(url, token, REPLAY_KEY, rec)}\n  ` +
              `replay:${describeAsk(url, token, REPLAY_KEY, rep)}`,
          );
        info.replay_sample = rec.text.slice(0, 2000);
        res.ask_response_bytes = {
          ...res.ask_response_bytes,
          ours_fresh: Buffer.byteLength(fresh[0]!.text),
          ours_replay: Buffer.byteLength(rec.text),
        };

        const common = {
          ...base,
          origin: askUrl.origin,
          path: askUrl.pathname,
          mode: 'static' as const,
          body: ASK_BODY,
          contentType: 'application/json',
        };
        // Replays first: they should write nothing, so they are measured before the fresh run grows the state.
        log(
          `load: ours POST /chat/ask replay (Idempotency-Key: ${REPLAY_KEY})${info.server_args.length ? ` [${info.server_args.join(' ')}]` : ''}`,
        );
        const rr = await runLoad({
          ...common,
          headers: { authorization: `Bearer ${token}`, 'idempotency-key': REPLAY_KEY },
          expectBody: rec.text,
        });
        res.ours_ask_replay_warmup = rr.warmup;
        res.ours_ask_replay = rr.main;
        log(briefRun('ours ask replay', rr.main));
        checkRun(failures, 'OURS ASK REPLAY', 'warm-up', rr.warmup);
        checkRun(failures, 'OURS ASK REPLAY', 'measured run', rr.main);

        log('load: ours POST /chat/ask fresh (no Idempotency-Key)');
        const rf = await runLoad({ ...common, headers: { authorization: `Bearer ${token}` } });
        res.ours_ask_fresh_warmup = rf.warmup;
        res.ours_ask_fresh = rf.main;
        log(briefRun('ours ask fresh', rf.main));
        checkRun(failures, 'OURS ASK FRESH', 'warm-up', rf.warmup);
        checkRun(failures, 'OURS ASK FRESH', 'measured run', rf.main);

        // The stored record must survive the fresh run.
        const after = await postAsk(url, token, REPLAY_KEY);
        if (after.status !== 200 || after.text !== rec.text)
          failures.push(
            `ours: replay after the fresh run differs from the stored response${describeAsk(url, token, REPLAY_KEY, after)}\n  stored body: ` +
              `${rec.text.slice(0, 2000)}`,
          );
      } finally {
        res.peak_rss_kb['ours_ask'] = peakRssKb(p.child.pid!);
        await stopProc(p);
        if (p.child.exitCode !== null && p.child.exitCode !== 0) log(`ours (ask) exited with code ${p.child.exitCode} after SIGTERM`);
        removeTempDir(dir);
        noteNoise('ours_ask', meter);
      }
    });
}

// ---------- report ----------

async function main(): Promise<void> {
  const o = parseArgs(process.argv.slice(2));
  // Hard bound on the whole run: quiet wait + ready rounds + up to 7 load phases (each warm-up + run + slack).
  // Scenario storage adds its own bound (generous: each of its phases at its deadline).
  const storageOpts: StorageOpts = {
    sizes: o.storageSizes,
    starts: o.storageStarts,
    connections: o.connections,
    warmupSec: o.warmupSec,
    durationSec: o.storageDurationSec,
    soakSec: o.soakSec,
    soakWriteRate: o.soakWriteRate,
    bin: OURS_BIN,
    root: ROOT,
  };
  const cliOpts: CliOpts = { runs: o.runs, bin: OURS_BIN, root: ROOT };
  installCleanupHandlers(
    (Math.max(480, o.quietWaitSec + o.runs * 4 * 2 + 7 * (o.warmupSec + o.durationSec + 20) + 60) +
      (runsStorage(o) ? storageBudgetSec(storageOpts) : 0) +
      (runsCli(o) ? cliBudgetSec(cliOpts) : 0)) *
      1000,
  );
  const loadAtStart = os.loadavg().map((x) => round(x, 2));
  // The machine may be shared (tests, browsers): wait a bounded time for it to go quiet, else say so.
  let busyBefore = await cpuBusyCores(1000);
  for (let i = 0; i < o.quietWaitSec / 5 && busyBefore !== undefined && busyBefore > QUIET_CORES; i++) {
    if (i === 0)
      log(`machine busy (${round(busyBefore, 2)} cores in use by other processes); waiting up to ${o.quietWaitSec} s for it to go quiet`);
    await sleep(4000);
    busyBefore = await cpuBusyCores(1000);
  }
  const noisy = busyBefore !== undefined && busyBefore > QUIET_CORES;
  if (noisy) log(`WARNING: ${round(busyBefore!, 2)} cores busy before starting; figures will be noisy`);
  const startedAt = performance.now();
  if (o.only !== 'baselines' && !existsSync(OURS_BIN)) throw new BenchError(`${OURS_BIN} not found (is the server built?)`);
  const failures: string[] = [];

  const ready = o.skip.has('ready') ? undefined : await measureReady(o, failures);
  const load = o.skip.has('load') || (!runsRefresh(o) && !runsAsk(o)) ? undefined : await measureLoad(o, failures);
  const storage = runsStorage(o) ? await measureStorage(storageOpts, failures) : undefined;
  const cli = runsCli(o) ? await measureCli(cliOpts, failures) : undefined;

  const r = ready?.servers ?? {};
  const oursReady = r['ours']?.median_ms;
  const bareReady = r['bare_fastify']?.median_ms;
  const mockReady = r['oauth2_mock_server']?.median_ms;
  const oursRun = load?.ours_refresh;
  // Failed requests are cheap and would inflate req/s: no ratio from a run with any.
  const oursValid = oursRun !== undefined && oursRun.non2xx === 0 && oursRun.errors === 0;
  const oursRps = oursValid ? oursRun.reqPerSecMean : undefined;
  const mockRtRps = load?.mock_refresh_token?.reqPerSecMean;
  const mockCcRps = load?.mock_client_credentials?.reqPerSecMean;

  const ratio = (a?: number, b?: number): number | null => (a !== undefined && b !== undefined && b > 0 ? a / b : null);
  const t1 = ratio(oursReady, bareReady);
  const t2 = ratio(oursReady, mockReady);
  const t3 = ratio(oursRps, mockRtRps);
  const t4 = ratio(oursRps, mockCcRps);
  // Scenario "ask": same rule, and a replay run must also have returned the stored body every time.
  const validRun = (s?: RunSummary): boolean => s !== undefined && s.non2xx === 0 && s.errors === 0 && s.bodyMismatches === 0;
  const askRps = (s?: RunSummary): number | undefined => (s !== undefined && validRun(s) ? s.reqPerSecMean : undefined);
  const verifyRps = askRps(load?.bare_verify_ask);
  const freshRps = askRps(load?.ours_ask_fresh);
  const replayRps = askRps(load?.ours_ask_replay);
  const t5 = ratio(freshRps, verifyRps);
  const t6 = ratio(replayRps, verifyRps);
  const afterReady = ready?.ours_after_ready;
  // Both first requests on a new connection (AfterReadyOnce): what the first after ready pays over the first once warm
  // is warm-up left in the request path. Against the tenth, on the first's connection, it would pay the connection.
  const overWarm = (x?: AfterReadyStats) => ratio(x?.first_median_ms, x?.warm_first_median_ms);
  const overTenth = (x?: AfterReadyStats) => ratio(x?.first_median_ms, x?.tenth_median_ms);
  const warmOverTenth = (x?: AfterReadyStats) => ratio(x?.warm_first_median_ms, x?.warm_tenth_median_ms);
  const t7 = overWarm(afterReady);
  const bareAfterReady = ready?.bare_after_ready;
  // Ours over both of its load phases (token and ask) against the mock over its token phase; issue 47.1's bound, 1.1×
  // (it was 1× while the command line held V8's heap at run time, docs/bench.md "Start-up with Node's own tools").
  const oursPeaks = [load?.peak_rss_kb['ours_refresh'], load?.peak_rss_kb['ours_ask']].filter((x) => x !== undefined);
  const oursPeakKb = oursPeaks.length > 0 ? Math.max(...oursPeaks) : undefined;
  const mockPeakKb = load?.peak_rss_kb['oauth2_mock_server'];
  const t8 = ratio(oursPeakKb, mockPeakKb);
  const targets: Target[] = [
    { name: 'ours ready / bare fastify ready', value: t1, target: '<= 1.2', ok: t1 === null ? null : t1 <= 1.2 },
    { name: 'ours ready / oauth2-mock-server ready', value: t2, target: '<= 0.8', ok: t2 === null ? null : t2 <= 0.8 },
    {
      name: 'ours 1st request after ready / 1st once warm',
      value: t7,
      target: '<= 1',
      ok: t7 === null ? null : t7 <= 1,
      note:
        `a new connection both; bare fastify ${fmt(overWarm(bareAfterReady), 2)}x. ` +
        `1st / 10th, the 10th on the 1st's connection: ${fmt(overTenth(afterReady), 2)}x after ready, ` +
        `${fmt(warmOverTenth(afterReady), 2)}x once warm, bare fastify ${fmt(overTenth(bareAfterReady), 2)}x`,
    },
    ...(load && (runsRefresh(o) || runsAsk(o))
      ? [{ name: 'ours peak RSS (token, ask) / mock peak RSS', value: t8, target: '<= 1.1', ok: t8 === null ? null : t8 <= 1.1 }]
      : []),
    ...(runsRefresh(o)
      ? [
          { name: 'ours refresh req/s / mock refresh_token req/s', value: t3, target: '>= 4', ok: t3 === null ? null : t3 >= 4 },
          { name: '  (same vs mock client_credentials, stricter)', value: t4, target: '>= 4', ok: t4 === null ? null : t4 >= 4 },
        ]
      : []),
    ...(runsAsk(o)
      ? [
          { name: 'ours ask fresh req/s / bare verify req/s', value: t5, target: '>= 0.5', ok: t5 === null ? null : t5 >= 0.5 },
          { name: 'ours ask replay req/s / bare verify req/s', value: t6, target: '>= 0.9', ok: t6 === null ? null : t6 >= 0.9 },
        ]
      : []),
  ];
  if (storage) targets.push(...storageTargets(storage));
  if (runsCli(o)) targets.push(...cliTargets(cli));

  const rows: [string, string, string, string][] = [
    ['bare fastify (ceiling)', fmt(bareReady), fmt(load?.bare_fastify_post?.reqPerSecMean, 0), 'POST /oauth/token (trivial JSON)'],
    ['oauth2-mock-server', fmt(mockReady), fmt(mockRtRps, 0), 'POST /token grant_type=refresh_token'],
    ['', '', fmt(mockCcRps, 0), 'POST /token grant_type=client_credentials'],
    [
      'ours (--state file)',
      fmt(oursReady),
      oursRun && !oursValid ? `${fmt(oursRun.reqPerSecMean, 0)}!` : fmt(oursRps, 0),
      `POST /oauth/token refresh_token, rotating${oursRun && !oursValid ? ' (INVALID: non-2xx/errors)' : ''}`,
    ],
  ];
  const askCell = (s?: RunSummary): string => (s && !validRun(s) ? `${fmt(s.reqPerSecMean, 0)}!` : fmt(askRps(s), 0));
  const invalid = (s?: RunSummary): string => (s && !validRun(s) ? ' (INVALID: non-2xx/errors/body mismatch)' : '');
  if (runsAsk(o)) {
    rows.push(
      [
        'bare fastify + jwtVerify',
        '',
        askCell(load?.bare_verify_ask),
        `POST /chat/ask, ES256 jwtVerify + small JSON${invalid(load?.bare_verify_ask)}`,
      ],
      [
        'ours ask (--state file)',
        '',
        askCell(load?.ours_ask_fresh),
        `POST /chat/ask fresh, no Idempotency-Key (charged)${invalid(load?.ours_ask_fresh)}`,
      ],
      ['', '', askCell(load?.ours_ask_replay), `POST /chat/ask replay, Idempotency-Key: ${REPLAY_KEY}${invalid(load?.ours_ask_replay)}`],
    );
  }
  const lines: string[] = [];
  lines.push('');
  lines.push(
    `agent-access bench  node ${process.version}  ${os.cpus().length} cpus  ready: median of ${o.runs}  load: ${o.connections} conns, ${o.warmupSec}s ` +
      `warm-up + ${o.durationSec}s`,
  );
  lines.push('');
  lines.push(`${pad('server', 26)}${pad('ready ms', 11)}${pad('req/s', 10)}what was loaded`);
  lines.push('-'.repeat(90));
  for (const [a, b, c, d] of rows) lines.push(`${pad(a, 26)}${pad(b, 11)}${pad(c, 10)}${d}`);
  if (ready?.ours_first_start_ms !== undefined)
    lines.push(`${pad('  ours first start', 26)}${pad(fmt(ready.ours_first_start_ms), 11)}(fresh state file, informational)`);
  if (r['ours_in_memory']) lines.push(`${pad('  ours --in-memory', 26)}${pad(fmt(r['ours_in_memory'].median_ms), 11)}(informational)`);
  if (r['ours_no_compile_cache'])
    lines.push(
      `${pad('  ours, no compile cache', 26)}${pad(fmt(r['ours_no_compile_cache'].median_ms), 11)}(NODE_DISABLE_COMPILE_CACHE=1: a first start after an ` +
        `install; informational)`,
    );
  if (r['ours']?.ready_line_median_ms !== undefined)
    lines.push(
      `${pad('  ours JSON ready line', 26)}${pad(fmt(r['ours'].ready_line_median_ms), 11)}(spawn -> ready line on stdout, informational)`,
    );
  for (const [who, x] of [
    ['ours', afterReady],
    ['bare fastify', ready?.bare_after_ready],
  ] as const)
    if (x)
      lines.push(
        `  ${who} after the ready line: request 1 ${fmt(x.first_median_ms, 2)} ms, request 10 ${fmt(x.tenth_median_ms, 2)} ms; ` +
          `slowest in the ${AFTER_READY_WINDOW_MS / 1000} s after: median ${fmt(x.window_max_median_ms, 1)} ms, max ${fmt(x.window_max_ms, 1)} ms; ` +
          `then a new connection: request 1 ${fmt(x.warm_first_median_ms, 2)} ms, request 10 ${fmt(x.warm_tenth_median_ms, 2)} ms`,
      );
  const mb = (kb?: number): string => (kb === undefined ? '-' : `${fmt(kb / 1024, 0)} MB`);
  if (load && Object.keys(load.peak_rss_kb).length > 0)
    lines.push(
      `  peak RSS: ${Object.entries(load.peak_rss_kb)
        .map(([k, v]) => `${k} ${mb(v)}`)
        .join(', ')}`,
    );
  if (load?.ours_refresh) {
    const s = load.ours_refresh;
    lines.push(
      `${pad('  ours non-2xx', 26)}${pad(String(s.non2xx), 11)}errors ${s.errors}, timeouts ${s.timeouts}, p50 ${s.latencyMsP50} ms, p99 ${s.latencyMsP99} ms`,
    );
  }
  for (const [label, s] of [
    ['  bare verify non-2xx', load?.bare_verify_ask],
    ['  ours fresh non-2xx', load?.ours_ask_fresh],
    ['  ours replay non-2xx', load?.ours_ask_replay],
  ] as const) {
    if (s)
      lines.push(
        `${pad(label, 26)}${pad(String(s.non2xx), 11)}errors ${s.errors}, timeouts ${s.timeouts}, body mismatches ${s.bodyMismatches}, p50 ` +
          `${s.latencyMsP50} ms, p99 ${s.latencyMsP99} ms`,
      );
  }
  if (load?.ours_ask) {
    const a = load.ours_ask;
    lines.push(
      `  ours ask server args: ${a.server_args.length ? a.server_args.join(' ') : '(none)'}` +
        (a.rate_limit_headers ? `, rate-limit headers ${JSON.stringify(a.rate_limit_headers)}` : ''),
    );
  }
  if (load?.ask_response_bytes)
    lines.push(
      `  ask response body bytes: ${Object.entries(load.ask_response_bytes)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')}`,
    );
  if (storage) lines.push(...storageReport(storage));
  if (cli) lines.push(...cliReport(cli));
  lines.push('');
  lines.push('targets');
  lines.push('-'.repeat(90));
  for (const t of targets) {
    const mark = t.ok === null ? 'n/a' : t.ok ? 'ok' : 'MISSED';
    lines.push(`${pad(t.name, 50)}${pad(fmtRatio(t.value), 8)}${pad(t.target, 8)}${mark}${t.note !== undefined ? `  (${t.note})` : ''}`);
  }
  for (const n of ready?.notes ?? []) lines.push(`note: ${n}`);
  const foreign = [
    ...(ready?.foreign_cpu_cores !== undefined ? [['ready phase', ready.foreign_cpu_cores] as const] : []),
    ...Object.entries(load?.foreign_cpu_cores ?? {}).map(([k, v]) => [`load ${k}`, v] as const),
    ...Object.entries(storage?.foreign_cpu_cores ?? {}).map(([k, v]) => [k, v] as const),
    ...(cli?.foreign_cpu_cores !== undefined ? [['cli', cli.foreign_cpu_cores] as const] : []),
  ];
  const worstForeign = foreign.length > 0 ? Math.max(...foreign.map(([, v]) => v)) : 0;
  if (foreign.length > 0) {
    const worst = worstForeign;
    lines.push(
      `${worst > QUIET_CORES ? 'WARNING: noisy machine, ' : ''}cores used by other processes during the bench: ` +
        `${foreign.map(([k, v]) => `${k} ${v}`).join(', ')}`,
    );
  }
  if (noisy)
    lines.push(
      `WARNING: ${round(busyBefore!, 2)} of ${os.cpus().length} cores were busy with other processes at the start; figures are noisy`,
    );
  for (const w of load?.flow_warnings ?? []) lines.push(`flow warning: ${w}`);
  for (const w of load?.ours_ask?.warnings ?? []) lines.push(`ask warning: ${w}`);
  lines.push(`total bench time ${round((performance.now() - startedAt) / 1000, 0)} s`);
  console.log(lines.join('\n'));

  mkdirSync(HERE, { recursive: true });
  const results = {
    date: new Date().toISOString(),
    node: process.version,
    cpus: os.cpus().length,
    loadavg_at_start: loadAtStart,
    cpu_busy_cores_before: busyBefore === undefined ? null : round(busyBefore, 2),
    noisy: noisy || worstForeign > QUIET_CORES,
    loadavg_at_end: os.loadavg().map((x) => round(x, 2)),
    config: {
      runs: o.runs,
      connections: o.connections,
      warmup_s: o.warmupSec,
      duration_s: o.durationSec,
      only: o.only,
      scenario: o.scenario,
      skip: [...o.skip],
      ...(storage
        ? {
            storage_sizes: o.storageSizes,
            storage_starts: o.storageStarts,
            storage_duration_s: o.storageDurationSec,
            soak_s: o.soakSec,
            soak_write_rate: o.soakWriteRate,
          }
        : {}),
    },
    ready,
    throughput: load,
    storage,
    cli,
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
