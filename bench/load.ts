// Load generator, run as its own process so autocannon does not share a core's event loop with the driver.
// Reads a LoadConfig JSON on stdin, runs a warm-up then the measured run, prints one JSON result on stdout.
import { performance } from 'node:perf_hooks';
import autocannon, { type Client, type Options, type Request, type Result } from 'autocannon';

export interface LoadConfig {
  origin: string;
  path: string;
  connections: number;
  warmupSec: number;
  durationSec: number;
  /**
   * static: the same body every time; refresh: per-connection rotating refresh-token chain;
   * soak: refresh, and from its warm-up on also the writers, with completions counted per second of the measured run
   */
  mode: 'static' | 'refresh' | 'soak';
  body?: string;
  contentType?: string;
  /** extra request headers (e.g. authorization, idempotency-key), sent on every request */
  headers?: Record<string, string>;
  /** static mode: every 2xx body must equal this string byte for byte (counted in bodyMismatches) */
  expectBody?: string;
  /** refresh and soak modes: one chain per connection for the warm-up, then one per connection for the measured run */
  warmupChains?: Chain[];
  chains?: Chain[];
  /** soak mode: writers running beside the refreshes, from the warm-up on */
  writers?: WriterConfig;
  /** per-request timeout, seconds (default 10) */
  timeoutSec?: number;
}

/** Writers of the soak: each request alternates POST askPath and POST researchPath with an Idempotency-Key of its own. */
export interface WriterConfig {
  /** one bearer token per connection (its length is the number of writer connections) */
  tokens: string[];
  askPath: string;
  researchPath: string;
  /** requests per second over all writer connections */
  rate: number;
  /** every request's Idempotency-Key is `${keyPrefix}-${connection}-${n}` */
  keyPrefix: string;
  /** JSON bodies' questions, used in turn */
  questions: string[];
}

/** What the soak adds to a measured run: completions per second of the run, from its start. */
export interface SoakOutput {
  /** 2xx refresh responses in each second */
  refreshPerSec: number[];
  /** 2xx writer responses (asks and research jobs) in each second */
  writesPerSec: number[];
  writers: RunSummary;
}

export interface Chain {
  clientId: string;
  refreshToken: string;
}

export interface RunSummary {
  reqPerSecMean: number;
  reqPerSecStddev: number;
  total2xx: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  resets: number;
  statusCodes: Record<string, number>;
  latencyMsP50: number;
  latencyMsP99: number;
  durationSec: number;
  /** 2xx responses whose body differed from expectBody (static mode with expectBody only) */
  bodyMismatches: number;
  badSamples: string[];
}

export interface LoadOutput {
  warmup: RunSummary;
  main: RunSummary;
  /** refresh mode: 2xx refreshes in each second of the measured run (a dip shows a pause of the server) */
  mainPerSec?: number[];
  soak?: SoakOutput;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** Failed-request samples and body mismatches of one autocannon run. */
class Recorder {
  badSamples: string[] = [];
  bodyMismatches = 0;
  bad(s: string): void {
    if (this.badSamples.length < 5) this.badSamples.push(s.slice(0, 600));
  }
}

/** Counts calls into one-second buckets from the moment start() is called; calls after the last bucket are dropped. */
class PerSecond {
  readonly counts: number[];
  /** Hits before start are not counted. */
  #t0 = Infinity;
  constructor(seconds: number) {
    this.counts = new Array<number>(seconds).fill(0);
  }
  start(): void {
    this.#t0 = performance.now();
  }
  hit(): void {
    const s = Math.floor((performance.now() - this.#t0) / 1000);
    if (s >= 0 && s < this.counts.length) this.counts[s]!++;
  }
}

const formHeaders = (cfg: LoadConfig): Record<string, string> => ({
  'content-type': cfg.contentType ?? 'application/x-www-form-urlencoded',
  ...(cfg.headers ?? {}),
});

/**
 * One rotating refresh-token chain per connection. autocannon resets `context` to initialContext after every pass
 * over `requests`, so a token kept in context would be lost; instead each client gets its own slot and its own
 * requests via setupClient.
 */
function refreshClients(cfg: LoadConfig, chains: Chain[] | undefined, rec: Recorder, onOk?: () => void): (c: Client) => void {
  const list = chains ?? [];
  if (list.length < cfg.connections) throw new Error(`need ${cfg.connections} chains, got ${list.length}`);
  const headers = formHeaders(cfg);
  let next = 0;
  return (client: Client): void => {
    const i = next++;
    if (i >= list.length) throw new Error('more clients than token chains');
    const slot = { token: list[i]!.refreshToken, clientId: list[i]!.clientId };
    client.setRequests([
      {
        method: 'POST',
        path: cfg.path,
        headers,
        setupRequest: (req) => {
          req.body = new URLSearchParams({
            grant_type: 'refresh_token',
            refresh_token: slot.token,
            client_id: slot.clientId,
          }).toString();
          return req;
        },
        onResponse: (status, body) => {
          if (status !== 200) {
            rec.bad(`conn ${i}: POST ${cfg.path} refresh_token=${slot.token.slice(0, 12)}… -> ${status} ${body}`);
            return;
          }
          try {
            const rt = (JSON.parse(body) as { refresh_token?: unknown }).refresh_token;
            if (typeof rt === 'string') {
              slot.token = rt;
              onOk?.();
            } else rec.bad(`conn ${i}: 200 without refresh_token: ${body}`);
          } catch {
            rec.bad(`conn ${i}: 200 with non-JSON body: ${body}`);
          }
        },
      },
    ]);
  };
}

/** Soak writers: per connection its own bearer token, alternating ask and research, every request a new key. */
function writerClients(w: WriterConfig, rec: Recorder, onOk: () => void): (c: Client) => void {
  let next = 0;
  let question = 0;
  return (client: Client): void => {
    const i = next++;
    const token = w.tokens[i];
    if (token === undefined) throw new Error('more writer clients than tokens');
    let n = 0;
    const request = (path: string): Request => ({
      method: 'POST',
      path,
      setupRequest: (req) => {
        req.headers = {
          'content-type': 'application/json',
          authorization: `Bearer ${token}`,
          'idempotency-key': `${w.keyPrefix}-${i}-${n++}`,
        };
        req.body = JSON.stringify({ question: w.questions[question++ % w.questions.length] });
        return req;
      },
      onResponse: (status, body) => {
        if (status >= 200 && status < 300) onOk();
        else rec.bad(`writer ${i}: POST ${path} -> ${status} ${body}`);
      },
    });
    client.setRequests([request(w.askPath), request(w.researchPath)]);
  };
}

function summarize(r: Result, rec: Recorder): RunSummary {
  const statusCodes: Record<string, number> = {};
  for (const [k, v] of Object.entries(r.statusCodeStats ?? {})) statusCodes[k] = v.count;
  return {
    reqPerSecMean: r.requests.mean,
    reqPerSecStddev: r.requests.stddev,
    total2xx: r['2xx'],
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    resets: r.resets,
    statusCodes,
    latencyMsP50: r.latency.p50,
    latencyMsP99: r.latency.p99,
    durationSec: r.duration,
    bodyMismatches: rec.bodyMismatches,
    badSamples: rec.badSamples,
  };
}

function cannon(cfg: LoadConfig, durationSec: number, extra: Partial<Options>): Promise<Result> {
  return autocannon({
    url: cfg.origin,
    connections: cfg.connections,
    pipelining: 1, // never two refreshes in flight on one connection
    duration: durationSec,
    timeout: cfg.timeoutSec ?? 10,
    ...extra,
  });
}

async function runOnce(cfg: LoadConfig, durationSec: number, chains: Chain[] | undefined, perSec?: PerSecond): Promise<RunSummary> {
  const rec = new Recorder();
  if (cfg.mode !== 'static') {
    perSec?.start();
    return summarize(await cannon(cfg, durationSec, { setupClient: refreshClients(cfg, chains, rec, () => perSec?.hit()) }), rec);
  }
  const requests: Request[] = [
    {
      method: 'POST',
      path: cfg.path,
      headers: formHeaders(cfg),
      body: cfg.body ?? '',
      onResponse: (status, body) => {
        if (status < 200 || status >= 300) rec.bad(`POST ${cfg.path} -> ${status} ${body}`);
        else if (cfg.expectBody !== undefined && body !== cfg.expectBody) {
          rec.bodyMismatches++;
          rec.bad(`POST ${cfg.path} -> ${status}, body differs from the expected one: ${body}`);
        }
      },
    },
  ];
  return summarize(await cannon(cfg, durationSec, { requests }), rec);
}

/** Seconds the soak's writers run on after the refreshes' measured run should have ended. */
const WRITERS_OVERRUN_SEC = 5;

/**
 * The soak: the refresh warm-up, then the measured run of refreshes, with the writers running from the warm-up on
 * (so that the first measured seconds hold asks and research jobs at their steady cost, their code compiled and
 * their first rankings made, as the last ones do); completions of each counted per second of the measured run.
 */
async function runSoak(cfg: LoadConfig): Promise<LoadOutput> {
  const w = cfg.writers;
  if (w === undefined || w.tokens.length === 0) throw new Error('soak mode needs writers with at least one token');
  const refreshRec = new Recorder();
  const writerRec = new Recorder();
  const refreshes = new PerSecond(cfg.durationSec);
  const writes = new PerSecond(cfg.durationSec);
  // They start a warm-up ahead of the refreshes: held back while their first requests are slow, they send the
  // backlog at once (twice the rate for two seconds), which would fall into the first measured seconds. And they
  // run on a little after the measured run (which starts when the warm-up is done, not on a timer); what they do
  // then is not counted.
  const writing = cannon(cfg, 2 * cfg.warmupSec + cfg.durationSec + WRITERS_OVERRUN_SEC, {
    connections: w.tokens.length,
    overallRate: w.rate,
    setupClient: writerClients(w, writerRec, () => writes.hit()),
  });
  // Awaited below; a warm-up that fails first must not leave it unhandled.
  writing.catch(() => undefined);
  await new Promise((resolve) => setTimeout(resolve, cfg.warmupSec * 1000));
  const warmup = await runOnce(cfg, cfg.warmupSec, cfg.warmupChains);
  refreshes.start();
  writes.start();
  const r = await cannon(cfg, cfg.durationSec, { setupClient: refreshClients(cfg, cfg.chains, refreshRec, () => refreshes.hit()) });
  const wr = await writing;
  return {
    warmup,
    main: summarize(r, refreshRec),
    soak: { refreshPerSec: refreshes.counts, writesPerSec: writes.counts, writers: summarize(wr, writerRec) },
  };
}

async function main(): Promise<void> {
  const cfg = JSON.parse(await readStdin()) as LoadConfig;
  const guard = setTimeout(
    () => {
      console.error('[load] time limit reached');
      process.exit(3);
    },
    (2 * cfg.warmupSec + cfg.durationSec + WRITERS_OVERRUN_SEC + 30 + (cfg.timeoutSec ?? 10)) * 1000,
  );
  // Separate token sets: a run ends with requests in flight whose rotation the client never sees,
  // so reusing those chains would replay old tokens and (correctly) kill their families.
  let out: LoadOutput;
  if (cfg.mode === 'soak') out = await runSoak(cfg);
  else if (cfg.mode === 'refresh') {
    const warmup = await runOnce(cfg, cfg.warmupSec, cfg.warmupChains);
    const perSec = new PerSecond(cfg.durationSec);
    out = { warmup, main: await runOnce(cfg, cfg.durationSec, cfg.chains, perSec), mainPerSec: perSec.counts };
  } else out = { warmup: await runOnce(cfg, cfg.warmupSec, cfg.warmupChains), main: await runOnce(cfg, cfg.durationSec, cfg.chains) };
  clearTimeout(guard);
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((err: unknown) => {
  console.error('[load] failed:', err);
  process.exit(1);
});
