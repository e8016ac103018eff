// Scenario "storage": how ours scales with the size of its state, driven only from outside (spawned `serve`, HTTP).
// For each size a generated scenario is loaded into a new state file once and a second `serve --state` is timed
// to its first 200; then one server per size carries the rotating refresh grant in interleaved windows, and each
// server's peak RSS is read. A mixed soak grows a state with keyed asks and research jobs while refreshes run and
// compares the refresh rate at its end and start.
import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { request } from 'undici';
import type { Chain, RunSummary, SoakOutput } from './load.js';
import { BENCH_QUESTIONS, writeBenchScenario, type BenchGrant } from './scenario-gen.js';
import {
  BenchError,
  briefRun,
  fmt,
  fmtRatio,
  freePorts,
  isBenchFailure,
  log,
  makeTempDir,
  median,
  NoiseMeter,
  pad,
  peakRssKb,
  pollUntil200,
  removeTempDir,
  round,
  runLoad,
  serveArgs,
  startProc,
  stopProc,
  waitForJsonLine,
  type Proc,
  type Target,
} from './util.js';

export interface StorageOpts {
  /** records per generated scenario, smallest first (default 1 000 and 100 000) */
  sizes: number[];
  /** second starts timed per size (median reported) */
  starts: number;
  connections: number;
  warmupSec: number;
  /** measured refresh load per size, s, in REFRESH_ROUNDS windows (the largest size one more) */
  durationSec: number;
  /** measured length of the mixed soak, s; 0 skips it */
  soakSec: number;
  /** keyed asks and research jobs per second over all soak writers */
  soakWriteRate: number;
  /** the server binary (bin/agent-access.js) and the directory to run it in */
  bin: string;
  root: string;
}

export const DEFAULT_SIZES = [1_000, 100_000];
/** Enough writer connections that the offered rate, not the wait for each durable write, sets the pace on a fast store. */
const SOAK_WRITERS = 8;
/** The REST allowlist is rate-limited per grant (60/min by default); the soak's writers must not hit it. */
const SOAK_SERVER_ARGS = ['--rate-limit', '1000000/min'];
/** Rounds of the refresh load: each size gets a window per round, the largest one more (100k 1k 100k 1k 100k). */
const REFRESH_ROUNDS = 2;
/** Measured seconds of one refresh window: --storage-duration spread over the rounds. */
const refreshWindowSec = (o: StorageOpts): number => Math.max(1, Math.round(o.durationSec / REFRESH_ROUNDS));
/** Refresh load each server gets before the measured windows (after a warm-up of --warmup s). */
const RUN_IN_SEC = 5;

/** Window compared at the start and the end of the soak, s (less when the soak is shorter than two windows). */
const SOAK_WINDOW_SEC = 10;

// Generous bounds: today's server needs ~20 s to create a 100k-record state and ~5 s to start on it.
const CREATE_DEADLINE_MS = 180_000;
const START_DEADLINE_MS = 120_000;
const STOP_GRACE_MS = 60_000;
/** Per-request timeout of the load: one durable write of a large state can take seconds. */
const LOAD_TIMEOUT_SEC = 60;

interface MsStats {
  median_ms: number;
  min_ms: number;
  max_ms: number;
  samples_ms: number[];
}

export interface StorageSize {
  records: number;
  counts: Record<string, number>;
  scenario_bytes: number;
  /** `serve --scenario F --state S`: spawn to first 200 (loading and checking the scenario, first write) */
  create_ms?: number;
  create_peak_rss_kb?: number;
  state_bytes?: number;
  ledger_bytes?: number;
  /** spawn of `serve --state S` (existing state) to its first 200 on the metadata URL */
  start?: MsStats;
  /** peak RSS of the timed starts (each start alone, no requests) */
  start_peak_rss_kb?: number;
  /** one refresh before the load, after the start: the first durable write of this process */
  first_refresh_ms?: number;
  /** the refresh load's windows, in the order they ran among all sizes' windows */
  refresh_windows?: RefreshWindow[];
  /** the windows as one run: rate weighted by duration, counts summed, p50 the windows' median, p99 the worst */
  refresh?: RunSummary;
  /** VmHWM of the server that carried the refresh load, read just before it was stopped */
  peak_rss_kb?: number;
  state_bytes_after_load?: number;
}

export interface RefreshWindow {
  /** 1-based place among all sizes' windows */
  position: number;
  warmup: RunSummary;
  main: RunSummary;
  /** 2xx refreshes in each second of the window */
  per_sec: number[];
  /** the other sizes whose server rewrote its state file (compacted) while this window ran */
  compacted_elsewhere?: string[];
}

export interface StorageSoak {
  records: number;
  duration_s: number;
  window_s: number;
  refresh_connections: number;
  writer_connections: number;
  write_rate_target: number;
  refresh_per_sec: number[];
  writes_per_sec: number[];
  refresh_first_window_rps: number;
  refresh_last_window_rps: number;
  writes_first_window_rps: number;
  writes_last_window_rps: number;
  refresh_warmup: RunSummary;
  refresh: RunSummary;
  writers: RunSummary;
  state_bytes_before: number;
  state_bytes_after?: number;
  peak_rss_kb?: number;
}

export interface StorageResults {
  sizes: StorageSize[];
  soak?: StorageSoak;
  /** CPU cores used by processes outside the bench during each phase */
  foreign_cpu_cores: Record<string, number>;
  notes: string[];
}

/** Upper bound of the scenario's run time, for the bench's hard limit (each phase at its deadline; starts at 30 s). */
export function storageBudgetSec(o: StorageOpts): number {
  const create = (CREATE_DEADLINE_MS + STOP_GRACE_MS) / 1000;
  const server = (START_DEADLINE_MS + STOP_GRACE_MS) / 1000 + LOAD_TIMEOUT_SEC;
  // runLoad's own limit: the warm-up, the measured seconds, 40 s and the request timeout.
  const run = (seconds: number): number => o.warmupSec + seconds + 40 + LOAD_TIMEOUT_SEC;
  const n = o.sizes.length;
  const windowSec = refreshWindowSec(o);
  const refresh = n * (server + run(RUN_IN_SEC)) + (REFRESH_ROUNDS * n + 1) * run(windowSec);
  const soak = o.soakSec > 0 ? create + server + (SOAK_WRITERS + 2) * LOAD_TIMEOUT_SEC + run(o.soakSec) : 0;
  return n * (create + o.starts * 30) + refresh + soak;
}

export const sizeLabel = (n: number): string => (n >= 1000 && n % 1000 === 0 ? `${n / 1000}k` : String(n));

const fileBytes = (f: string): number | undefined => (existsSync(f) ? statSync(f).size : undefined);

function msStats(ms: number[]): MsStats {
  return {
    median_ms: round(median(ms)),
    min_ms: round(Math.min(...ms)),
    max_ms: round(Math.max(...ms)),
    samples_ms: ms.map((x) => round(x)),
  };
}

interface Started {
  p: Proc;
  ms: number;
  baseUrl: string;
  pid: number;
}

/** Spawns `serve` with these arguments and waits for its JSON ready line, then for the first 200 on the metadata URL. */
async function startOurs(o: StorageOpts, label: string, args: string[], deadlineMs: number): Promise<Started> {
  const ports = await freePorts(2);
  const p = startProc(label, serveArgs(o.bin, ports, args), o.root);
  try {
    // The ready line first, then the first 200: polling from the spawn on, a connection attempt every 2 ms, took
    // about a fifth of a core from the server's start on a 2-core machine (docs/bench.md, scenario storage, step 2).
    const ready = await waitForJsonLine(p, 'base_url', deadlineMs);
    const ms = await pollUntil200(p, `http://127.0.0.1:${ports[0]}/.well-known/oauth-authorization-server`, deadlineMs, 2);
    const pid = typeof ready['pid'] === 'number' ? ready['pid'] : p.child.pid;
    if (pid === undefined) throw new BenchError(`${label}: no pid`);
    return { p, ms, baseUrl: String(ready['base_url']).replace(/\/+$/, ''), pid };
  } catch (e) {
    await stopProc(p);
    throw e;
  }
}

/** Stops a server the way the harness does (SIGTERM, bounded); an unclean exit is noted, and false returned. */
async function stopOurs(p: Proc, notes: string[]): Promise<boolean> {
  await stopProc(p, STOP_GRACE_MS);
  const clean = p.child.exitCode === 0;
  if (!clean) {
    const msg = `${p.name} exited with code ${p.child.exitCode}, signal ${p.child.signalCode} after SIGTERM`;
    log(msg);
    notes.push(msg);
  }
  return clean;
}

const chainOf = (g: BenchGrant): Chain => ({ clientId: g.clientId, refreshToken: g.refreshToken });

/** One HTTP POST with the load's long timeout (a write of a large state takes seconds); any failure is a BenchError. */
async function post(url: string, headers: Record<string, string>, body: string): Promise<{ status: number; text: string }> {
  try {
    const r = await request(url, {
      method: 'POST',
      headers,
      body,
      headersTimeout: LOAD_TIMEOUT_SEC * 1000,
      bodyTimeout: LOAD_TIMEOUT_SEC * 1000,
    });
    return { status: r.statusCode, text: await r.body.text() };
  } catch (e) {
    throw new BenchError(`POST ${url}: ${e instanceof Error ? e.message : String(e)}`);
  }
}

/** Refreshes a scenario grant once; returns the token response. */
async function refreshGrant(baseUrl: string, g: BenchGrant): Promise<Record<string, unknown>> {
  const body = new URLSearchParams({ grant_type: 'refresh_token', refresh_token: g.refreshToken, client_id: g.clientId }).toString();
  const r = await post(`${baseUrl}/oauth/token`, { 'content-type': 'application/x-www-form-urlencoded' }, body);
  if (r.status !== 200) throw new BenchError(`refresh of ${g.grantId} -> ${r.status} ${r.text.slice(0, 500)}`);
  return JSON.parse(r.text) as Record<string, unknown>;
}

function checkRun(failures: string[], who: string, s: RunSummary): void {
  if (s.non2xx > 0 || s.errors > 0)
    failures.push(
      `${who} RETURNED ${s.non2xx} NON-2XX (${JSON.stringify(s.statusCodes)}), ${s.errors} errors, ${s.timeouts} timeouts\n` +
        s.badSamples.map((b) => `    ${b}`).join('\n'),
    );
}

/** Creates the state of a scenario with `serve --scenario F --state S`, stopped cleanly; throws if it is not. */
async function createState(o: StorageOpts, scenario: string, state: string, out: StorageSize, notes: string[]): Promise<void> {
  const t0 = performance.now();
  const s = await startOurs(o, `ours (create ${sizeLabel(out.records)})`, ['--scenario', scenario, '--state', state], CREATE_DEADLINE_MS);
  out.create_ms = round(s.ms);
  out.create_peak_rss_kb = peakRssKb(s.pid);
  if (!(await stopOurs(s.p, notes))) throw new BenchError(`the server that created ${state} did not stop cleanly`);
  out.state_bytes = fileBytes(state);
  out.ledger_bytes = fileBytes(state.replace(/\.json$/, '.charges.jsonl'));
  if (out.state_bytes === undefined) throw new BenchError(`no state file at ${state} after creating it`);
  log(
    `storage ${sizeLabel(out.records)}: state created in ${round((performance.now() - t0) / 1000, 1)} s (first 200 after ${round(s.ms / 1000, 2)} s), ` +
      `${round(out.state_bytes / 1e6, 1)} MB`,
  );
}

/** Writes a size's scenario, creates its state and times second starts on it. */
async function prepareSize(o: StorageOpts, dir: string, records: number, res: StorageResults): Promise<Prepared> {
  const label = sizeLabel(records);
  const scenarioFile = path.join(dir, `scenario-${label}.json`);
  const gen = writeBenchScenario(scenarioFile, records);
  const out: StorageSize = { records, counts: gen.counts, scenario_bytes: gen.bytes };
  res.sizes.push(out);
  log(
    `storage ${label}: scenario ${round(gen.bytes / 1e6, 1)} MB (${Object.entries(gen.counts)
      .map(([k, v]) => `${v} ${k}`)
      .join(', ')})`,
  );
  const state = path.join(dir, `state-${label}.json`);
  await createState(o, scenarioFile, state, out, res.notes);

  const starts: number[] = [];
  let startPeak = 0;
  // A start is measured in a second or two of CPU-bound work, where another process's burst shows most.
  const meter = new NoiseMeter();
  for (let i = 0; i < o.starts; i++) {
    const s = await startOurs(o, `ours (start ${label})`, ['--state', state], START_DEADLINE_MS);
    starts.push(s.ms);
    startPeak = Math.max(startPeak, peakRssKb(s.pid) ?? 0);
    await stopOurs(s.p, res.notes);
  }
  const foreign = meter.stop();
  if (foreign !== undefined) res.foreign_cpu_cores[`storage_start_${label}`] = round(foreign, 2);
  if (starts.length > 0) {
    out.start = msStats(starts);
    if (startPeak > 0) out.start_peak_rss_kb = startPeak;
    log(`storage ${label}: start ${out.start.samples_ms.join(' ')} ms (median ${out.start.median_ms})`);
  }
  return { out, state, grants: gen.grants };
}

interface Prepared {
  out: StorageSize;
  state: string;
  grants: BenchGrant[];
}

interface Loaded extends Prepared {
  server: Started;
  windows: RefreshWindow[];
}

/** Refresh chains a size's load uses: a run-in and at most REFRESH_ROUNDS + 1 windows, each a warm-up and a measured run. */
const refreshChains = (c: number): number => 2 * c * (REFRESH_ROUNDS + 2);

/** When the state file of each server was last rewritten (a compaction), by the order of `loaded`. */
const foldTimes = (loaded: Loaded[]): number[] => loaded.map((l) => (existsSync(l.state) ? statSync(l.state).mtimeMs : 0));

/**
 * The rotating refresh grant on every size, one server per size running side by side. After a run-in of each, the
 * load is taken in windows in turns, largest size first and last (100k 1k 100k 1k 100k): with two sizes both have
 * the same mean place in time, so a drift of the machine's speed over the phase falls on both alike, and every
 * server sees loads of the same length with pauses between them (the largest one window more). Every window uses
 * refresh chains of its own: a window ends with rotations in flight whose new tokens the client never sees. A server
 * that compacts its state while another is measured is named in that window (an age-triggered compaction can come
 * in a pause).
 */
async function measureRefresh(o: StorageOpts, prepared: Prepared[], res: StorageResults, failures: string[]): Promise<void> {
  const c = o.connections;
  const firstRefresh = refreshChains(c);
  const ready: Prepared[] = [];
  for (const p of prepared) {
    if (p.grants.length > firstRefresh) ready.push(p);
    else failures.push(`storage ${sizeLabel(p.out.records)}: ${p.grants.length} grants, the refresh load needs ${firstRefresh + 1}`);
  }
  if (ready.length === 0) return;
  const windowSec = refreshWindowSec(o);
  const meter = new NoiseMeter();
  const loaded: Loaded[] = [];
  try {
    for (const p of ready) {
      const label = sizeLabel(p.out.records);
      const server = await startOurs(o, `ours (load ${label})`, ['--state', p.state], START_DEADLINE_MS);
      const l: Loaded = { ...p, server, windows: [] };
      l.out.refresh_windows = l.windows;
      loaded.push(l);
      const t0 = performance.now();
      await refreshGrant(server.baseUrl, p.grants[firstRefresh]!);
      p.out.first_refresh_ms = round(performance.now() - t0);
      log(`storage ${label}: first refresh ${p.out.first_refresh_ms} ms`);
    }
    /** The refresh load on `l` for a warm-up and `seconds`, on the k-th pair of its grants' blocks of c chains. */
    const load = (l: Loaded, k: number, seconds: number) => {
      const tokenUrl = new URL(`${l.server.baseUrl}/oauth/token`);
      return runLoad({
        origin: tokenUrl.origin,
        path: tokenUrl.pathname,
        mode: 'refresh',
        connections: c,
        warmupSec: o.warmupSec,
        durationSec: seconds,
        timeoutSec: LOAD_TIMEOUT_SEC,
        warmupChains: l.grants.slice(2 * k * c, (2 * k + 1) * c).map(chainOf),
        chains: l.grants.slice((2 * k + 1) * c, (2 * k + 2) * c).map(chainOf),
      });
    };
    const largestFirst = [...loaded].reverse();
    // A server's first seconds under load are slower (its young generation grows, its code is optimised): each is
    // run in first, so that no size's figure holds a cold window.
    log(`storage: run-in of every server, ${o.warmupSec + RUN_IN_SEC} s each`);
    for (const l of largestFirst) {
      const r = await load(l, 0, RUN_IN_SEC);
      checkRun(failures, `OURS (storage ${sizeLabel(l.out.records)}, refresh run-in warm-up)`, r.warmup);
      checkRun(failures, `OURS (storage ${sizeLabel(l.out.records)}, refresh run-in)`, r.main);
    }
    const order = [...Array.from({ length: REFRESH_ROUNDS }, () => largestFirst).flat(), largestFirst[0]!];
    log(
      `storage: load POST /oauth/token refresh_token on the scenarios' grants, ${order.map((l) => sizeLabel(l.out.records)).join(' ')}, ` +
        `${o.warmupSec} s warm-up + ${windowSec} s each`,
    );
    for (const [i, l] of order.entries()) {
      const label = sizeLabel(l.out.records);
      const before = foldTimes(loaded);
      const r = await load(l, 1 + l.windows.length, windowSec);
      const after = foldTimes(loaded);
      const elsewhere = loaded.filter((other, j) => other !== l && after[j] !== before[j]).map((other) => sizeLabel(other.out.records));
      l.windows.push({
        position: i + 1,
        warmup: r.warmup,
        main: r.main,
        per_sec: r.mainPerSec ?? [],
        ...(elsewhere.length > 0 ? { compacted_elsewhere: elsewhere } : {}),
      });
      log(
        briefRun(`storage ${label} refresh, window ${i + 1}`, r.main) +
          (elsewhere.length > 0 ? `; meanwhile the ${elsewhere.join(', ')} server compacted its state` : ''),
      );
      checkRun(failures, `OURS (storage ${label}, refresh warm-up of window ${i + 1})`, r.warmup);
      checkRun(failures, `OURS (storage ${label}, refresh window ${i + 1})`, r.main);
    }
  } finally {
    // What was measured is kept even when a later window failed.
    for (const l of loaded) {
      if (l.windows.length > 0) l.out.refresh = mergeRuns(l.windows);
      const peak = peakRssKb(l.server.pid);
      if (peak !== undefined) l.out.peak_rss_kb = peak;
    }
    for (const l of loaded) {
      await stopOurs(l.server.p, res.notes);
      l.out.state_bytes_after_load = fileBytes(l.state);
    }
    const n = meter.stop();
    if (n !== undefined) res.foreign_cpu_cores['storage_load'] = round(n, 2);
  }
}

/**
 * The windows of one size as one run: the rate weighted by their measured seconds, counts summed, p50 the windows'
 * median, p99 the worst, the standard deviation over all their per-second counts.
 */
function mergeRuns(windows: RefreshWindow[]): RunSummary {
  const rs = windows.map((w) => w.main);
  const seconds = rs.reduce((a, r) => a + r.durationSec, 0);
  const statusCodes: Record<string, number> = {};
  for (const r of rs) for (const [k, v] of Object.entries(r.statusCodes)) statusCodes[k] = (statusCodes[k] ?? 0) + v;
  const sum = (f: (r: RunSummary) => number): number => rs.reduce((a, r) => a + f(r), 0);
  const perSec = windows.flatMap((w) => w.per_sec);
  const mean = perSec.reduce((a, x) => a + x, 0) / Math.max(1, perSec.length);
  return {
    reqPerSecMean: seconds > 0 ? sum((r) => r.reqPerSecMean * r.durationSec) / seconds : 0,
    reqPerSecStddev: Math.sqrt(perSec.reduce((a, x) => a + (x - mean) ** 2, 0) / Math.max(1, perSec.length)),
    total2xx: sum((r) => r.total2xx),
    non2xx: sum((r) => r.non2xx),
    errors: sum((r) => r.errors),
    timeouts: sum((r) => r.timeouts),
    resets: sum((r) => r.resets),
    statusCodes,
    latencyMsP50: median(rs.map((r) => r.latencyMsP50)),
    latencyMsP99: Math.max(...rs.map((r) => r.latencyMsP99)),
    durationSec: seconds,
    bodyMismatches: sum((r) => r.bodyMismatches),
    badSamples: rs.flatMap((r) => r.badSamples).slice(0, 5),
  };
}

const postJson = (url: string, token: string, key: string, body: unknown): Promise<{ status: number; text: string }> =>
  post(url, { 'content-type': 'application/json', authorization: `Bearer ${token}`, 'idempotency-key': key }, JSON.stringify(body));

const windowRate = (xs: number[], from: number, w: number): number => xs.slice(from, from + w).reduce((a, b) => a + b, 0) / w;

/** The mixed soak on a new state from the smallest scenario: keyed asks and research jobs while refreshes run. */
async function measureSoak(o: StorageOpts, dir: string, res: StorageResults, failures: string[]): Promise<void> {
  const records = o.sizes[0]!;
  const label = sizeLabel(records);
  const scenarioFile = path.join(dir, `scenario-soak-${label}.json`);
  const gen = writeBenchScenario(scenarioFile, records);
  const c = o.connections;
  if (gen.grants.length < 2 * c + SOAK_WRITERS)
    throw new BenchError(`storage soak: ${gen.grants.length} grants, it needs ${2 * c + SOAK_WRITERS}`);
  const state = path.join(dir, `state-soak-${label}.json`);
  const meter = new NoiseMeter();
  const s = await startOurs(
    o,
    `ours (soak ${label})`,
    ['--scenario', scenarioFile, '--state', state, ...SOAK_SERVER_ARGS],
    CREATE_DEADLINE_MS,
  );
  try {
    // Access tokens for the writers (scopes ask and research, audience {base_url}/mcp), one grant each.
    const tokens: string[] = [];
    for (const g of gen.grants.slice(2 * c, 2 * c + SOAK_WRITERS)) {
      const t = await refreshGrant(s.baseUrl, g);
      if (typeof t['access_token'] !== 'string') throw new BenchError(`storage soak: refresh of ${g.grantId} returned no access_token`);
      tokens.push(t['access_token']);
    }
    const keyPrefix = `soak-${Date.now().toString(36)}`;
    const ask = await postJson(`${s.baseUrl}/chat/ask`, tokens[0]!, `${keyPrefix}-sanity-ask`, { question: BENCH_QUESTIONS[0] });
    if (ask.status !== 200) throw new BenchError(`storage soak: sanity POST /chat/ask -> ${ask.status} ${ask.text.slice(0, 500)}`);
    const job = await postJson(`${s.baseUrl}/research`, tokens[0]!, `${keyPrefix}-sanity-research`, { question: BENCH_QUESTIONS[1] });
    if (job.status !== 202) throw new BenchError(`storage soak: sanity POST /research -> ${job.status} ${job.text.slice(0, 500)}`);
    const before = fileBytes(state) ?? 0;
    const window = Math.max(1, Math.min(SOAK_WINDOW_SEC, Math.floor(o.soakSec / 2)));
    log(
      `storage soak: ${o.soakSec} s of refreshes (${c} connections) with keyed asks and research jobs (${SOAK_WRITERS} connections, ${o.soakWriteRate}/s) ` +
        `on a new ${label} state`,
    );
    const r = await runLoad({
      origin: new URL(s.baseUrl).origin,
      path: '/oauth/token',
      mode: 'soak',
      connections: c,
      warmupSec: o.warmupSec,
      durationSec: o.soakSec,
      timeoutSec: LOAD_TIMEOUT_SEC,
      warmupChains: gen.grants.slice(0, c).map(chainOf),
      chains: gen.grants.slice(c, 2 * c).map(chainOf),
      writers: {
        tokens,
        askPath: '/chat/ask',
        researchPath: '/research',
        rate: o.soakWriteRate,
        keyPrefix,
        questions: [...BENCH_QUESTIONS],
      },
    });
    const soak: SoakOutput = r.soak!;
    const peak = peakRssKb(s.pid);
    const n = soak.refreshPerSec.length;
    res.soak = {
      records,
      duration_s: o.soakSec,
      window_s: window,
      refresh_connections: c,
      writer_connections: SOAK_WRITERS,
      write_rate_target: o.soakWriteRate,
      refresh_per_sec: soak.refreshPerSec,
      writes_per_sec: soak.writesPerSec,
      refresh_first_window_rps: round(windowRate(soak.refreshPerSec, 0, window)),
      refresh_last_window_rps: round(windowRate(soak.refreshPerSec, n - window, window)),
      writes_first_window_rps: round(windowRate(soak.writesPerSec, 0, window)),
      writes_last_window_rps: round(windowRate(soak.writesPerSec, n - window, window)),
      refresh_warmup: r.warmup,
      refresh: r.main,
      writers: soak.writers,
      state_bytes_before: before,
      ...(peak !== undefined ? { peak_rss_kb: peak } : {}),
    };
    log(
      `storage soak: refresh ${res.soak.refresh_first_window_rps} req/s in the first ${window} s, ${res.soak.refresh_last_window_rps} in the last; ` +
        `writes ${res.soak.writes_first_window_rps} -> ${res.soak.writes_last_window_rps} /s`,
    );
    checkRun(failures, 'OURS (storage soak, refresh warm-up)', r.warmup);
    checkRun(failures, 'OURS (storage soak, refresh)', r.main);
    checkRun(failures, 'OURS (storage soak, writers)', soak.writers);
  } finally {
    await stopOurs(s.p, res.notes);
    if (res.soak) res.soak.state_bytes_after = fileBytes(state);
    const n = meter.stop();
    if (n !== undefined) res.foreign_cpu_cores['storage_soak'] = round(n, 2);
  }
}

export async function measureStorage(o: StorageOpts, failures: string[]): Promise<StorageResults> {
  const res: StorageResults = { sizes: [], foreign_cpu_cores: {}, notes: [] };
  const dir = makeTempDir('aa-bench-storage-');
  try {
    const prepared: Prepared[] = [];
    for (const records of o.sizes) {
      try {
        prepared.push(await prepareSize(o, dir, records, res));
      } catch (e) {
        if (!isBenchFailure(e)) throw e;
        failures.push(`storage ${sizeLabel(records)}: ${e.message}`);
      }
    }
    try {
      await measureRefresh(o, prepared, res, failures);
    } catch (e) {
      if (!isBenchFailure(e)) throw e;
      failures.push(`storage refresh: ${e.message}`);
    }
    if (o.soakSec > 0) {
      try {
        await measureSoak(o, dir, res, failures);
      } catch (e) {
        if (!isBenchFailure(e)) throw e;
        failures.push(`storage soak: ${e.message}`);
      }
    }
  } finally {
    removeTempDir(dir);
  }
  return res;
}

// ---------- targets and report ----------

const validRps = (s?: RunSummary): number | undefined =>
  s !== undefined && s.non2xx === 0 && s.errors === 0 ? s.reqPerSecMean : undefined;
const ratio = (a?: number, b?: number): number | null => (a !== undefined && b !== undefined && b > 0 ? a / b : null);

export function storageTargets(res: StorageResults): Target[] {
  const targets: Target[] = [];
  const small = res.sizes[0];
  const large = res.sizes.length > 1 ? res.sizes.at(-1) : undefined;
  if (small && large) {
    const [a, b] = [sizeLabel(small.records), sizeLabel(large.records)];
    const t1 = ratio(validRps(large.refresh), validRps(small.refresh));
    const t2 = ratio(large.peak_rss_kb, small.peak_rss_kb);
    const startS = large.start ? large.start.median_ms / 1000 : null;
    const t3 = ratio(large.start?.median_ms, small.start?.median_ms);
    targets.push(
      { name: `storage: refresh req/s at ${b} / at ${a}`, value: t1, target: '>= 0.8', ok: t1 === null ? null : t1 >= 0.8 },
      { name: `storage: peak RSS at ${b} / at ${a}`, value: t2, target: '<= 5', ok: t2 === null ? null : t2 <= 5 },
      {
        name: `storage: start at ${b}, s`,
        value: startS,
        target: '<= 3',
        ok: startS === null ? null : startS <= 3,
        ...(t3 !== null ? { note: `${round(t3, 2)}x the start at ${a}` } : {}),
      },
    );
  }
  if (res.soak) {
    const s = res.soak;
    const valid = validRps(s.refresh) !== undefined;
    const t = valid ? ratio(s.refresh_last_window_rps, s.refresh_first_window_rps) : null;
    targets.push({
      name: `storage soak: refresh last ${s.window_s} s / first ${s.window_s} s`,
      value: t,
      target: '>= 0.8',
      ok: t === null ? null : t >= 0.8,
    });
  }
  return targets;
}

const mb = (bytes?: number): string => (bytes === undefined ? '-' : fmt(bytes / 1e6, 1));
const mbKb = (kb?: number): string => (kb === undefined ? '-' : fmt(kb / 1024, 0));

export function storageReport(res: StorageResults): string[] {
  const lines: string[] = [];
  lines.push('');
  lines.push('storage (generated scenarios; a second serve on the state each created)');
  lines.push('-'.repeat(103));
  lines.push(
    `${pad('records', 9)}${pad('scen MB', 9)}${pad('state MB', 10)}${pad('create s', 10)}${pad('start ms', 10)}` +
      `${pad('1st refresh ms', 16)}${pad('refresh/s', 11)}${pad('peak RSS MB', 12)}${pad('start RSS MB', 13)}`,
  );
  for (const s of res.sizes) {
    const rps = validRps(s.refresh);
    lines.push(
      pad(sizeLabel(s.records), 9) +
        pad(mb(s.scenario_bytes), 9) +
        pad(mb(s.state_bytes), 10) +
        pad(s.create_ms === undefined ? '-' : fmt(s.create_ms / 1000, 1), 10) +
        pad(fmt(s.start?.median_ms, 0), 10) +
        pad(fmt(s.first_refresh_ms, 0), 16) +
        pad(s.refresh && rps === undefined ? `${fmt(s.refresh.reqPerSecMean, 0)}!` : fmt(rps, 0), 11) +
        pad(mbKb(s.peak_rss_kb), 12) +
        pad(mbKb(s.start_peak_rss_kb), 13),
    );
  }
  const small = res.sizes[0];
  for (const s of res.sizes.slice(1)) {
    if (!small) break;
    const r = (a?: number, b?: number): string => fmtRatio(ratio(a, b));
    lines.push(
      `  ${sizeLabel(s.records)} / ${sizeLabel(small.records)}: start ${r(s.start?.median_ms, small.start?.median_ms)}x, ` +
        `refresh ${r(validRps(s.refresh), validRps(small.refresh))}x, peak RSS ${r(s.peak_rss_kb, small.peak_rss_kb)}x (at start ` +
        `${r(s.start_peak_rss_kb, small.start_peak_rss_kb)}x), state ${r(s.state_bytes, small.state_bytes)}x`,
    );
  }
  for (const s of res.sizes) {
    if (s.refresh)
      lines.push(
        `  ${pad(sizeLabel(s.records), 6)}refresh non-2xx ${s.refresh.non2xx}, errors ${s.refresh.errors}, timeouts ${s.refresh.timeouts}, p50 ` +
          `${s.refresh.latencyMsP50} ms, p99 ${s.refresh.latencyMsP99} ms; ` +
          `windows ${(s.refresh_windows ?? [])
            .map(
              (w) =>
                `#${w.position} ${fmt(w.main.reqPerSecMean, 0)}${w.compacted_elsewhere ? ` (${w.compacted_elsewhere.join(', ')} compacted meanwhile)` : ''}`,
            )
            .join(', ')} req/s`,
      );
  }
  if (res.soak) {
    const s = res.soak;
    lines.push(
      `soak (${s.duration_s} s on a new ${sizeLabel(s.records)} state): refresh ${fmt(s.refresh_first_window_rps, 0)} -> ` +
        `${fmt(s.refresh_last_window_rps, 0)} req/s ` +
        `(first / last ${s.window_s} s, ${s.refresh_connections} conns), keyed writes ${fmt(s.writes_first_window_rps, 0)} -> ` +
        `${fmt(s.writes_last_window_rps, 0)} /s ` +
        `(${s.writer_connections} conns, ${s.write_rate_target}/s offered)`,
    );
    lines.push(
      `  state ${mb(s.state_bytes_before)} -> ${mb(s.state_bytes_after)} MB, peak RSS ${mbKb(s.peak_rss_kb)} MB; ` +
        `refresh non-2xx ${s.refresh.non2xx}, errors ${s.refresh.errors}; writers non-2xx ${s.writers.non2xx}, errors ${s.writers.errors}, timeouts ` +
        `${s.writers.timeouts}`,
    );
  }
  for (const n of res.notes) lines.push(`note: ${n}`);
  return lines;
}
