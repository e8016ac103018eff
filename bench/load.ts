// Load generator, run as its own process so autocannon does not share a core's event loop with the driver.
// Reads a LoadConfig JSON on stdin, runs a warm-up then the measured run, prints one JSON result on stdout.
import autocannon, { type Client, type Request, type Result } from 'autocannon';

export interface LoadConfig {
  origin: string;
  path: string;
  connections: number;
  warmupSec: number;
  durationSec: number;
  /** static: the same body every time; refresh: per-connection rotating refresh-token chain */
  mode: 'static' | 'refresh';
  body?: string;
  contentType?: string;
  /** extra request headers (e.g. authorization, idempotency-key), sent on every request */
  headers?: Record<string, string>;
  /** static mode: every 2xx body must equal this string byte for byte (counted in bodyMismatches) */
  expectBody?: string;
  /** refresh mode: one chain per connection for the warm-up, then one per connection for the measured run */
  warmupChains?: Chain[];
  chains?: Chain[];
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
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function runOnce(cfg: LoadConfig, durationSec: number, chains: Chain[] | undefined): Promise<RunSummary> {
  const badSamples: string[] = [];
  const noteBad = (s: string): void => {
    if (badSamples.length < 5) badSamples.push(s.slice(0, 600));
  };
  const headers = { 'content-type': cfg.contentType ?? 'application/x-www-form-urlencoded', ...(cfg.headers ?? {}) };
  let bodyMismatches = 0;

  let setupClient: ((c: Client) => void) | undefined;
  let requests: Request[] | undefined;
  if (cfg.mode === 'refresh') {
    const list = chains ?? [];
    if (list.length < cfg.connections) throw new Error(`need ${cfg.connections} chains, got ${list.length}`);
    let next = 0;
    // autocannon resets `context` to initialContext after every pass over `requests`, so a token kept in
    // context would be lost; instead each client gets its own slot and its own requests via setupClient.
    setupClient = (client: Client): void => {
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
              noteBad(`conn ${i}: POST ${cfg.path} refresh_token=${slot.token.slice(0, 12)}… -> ${status} ${body}`);
              return;
            }
            try {
              const rt = (JSON.parse(body) as { refresh_token?: unknown }).refresh_token;
              if (typeof rt === 'string') slot.token = rt;
              else noteBad(`conn ${i}: 200 without refresh_token: ${body}`);
            } catch {
              noteBad(`conn ${i}: 200 with non-JSON body: ${body}`);
            }
          },
        },
      ]);
    };
  } else {
    requests = [
      {
        method: 'POST',
        path: cfg.path,
        headers,
        body: cfg.body ?? '',
        onResponse: (status, body) => {
          if (status < 200 || status >= 300) noteBad(`POST ${cfg.path} -> ${status} ${body}`);
          else if (cfg.expectBody !== undefined && body !== cfg.expectBody) {
            bodyMismatches++;
            noteBad(`POST ${cfg.path} -> ${status}, body differs from the expected one: ${body}`);
          }
        },
      },
    ];
  }

  const r: Result = await autocannon({
    url: cfg.origin,
    connections: cfg.connections,
    pipelining: 1, // never two refreshes in flight on one connection
    duration: durationSec,
    timeout: 10,
    ...(requests ? { requests } : {}),
    ...(setupClient ? { setupClient } : {}),
  });
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
    bodyMismatches,
    badSamples,
  };
}

async function main(): Promise<void> {
  const cfg = JSON.parse(await readStdin()) as LoadConfig;
  const guard = setTimeout(
    () => {
      console.error('[load] time limit reached');
      process.exit(3);
    },
    (cfg.warmupSec + cfg.durationSec + 30) * 1000,
  );
  // Separate token sets: a run ends with requests in flight whose rotation the client never sees,
  // so reusing those chains would replay old tokens and (correctly) kill their families.
  const warmup = await runOnce(cfg, cfg.warmupSec, cfg.warmupChains);
  const main = await runOnce(cfg, cfg.durationSec, cfg.chains);
  clearTimeout(guard);
  const out: LoadOutput = { warmup, main };
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((err: unknown) => {
  console.error('[load] failed:', err);
  process.exit(1);
});
