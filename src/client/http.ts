import { setTimeout as sleep } from 'node:timers/promises';
import type * as Undici from 'undici';
import type { Agent } from 'undici';
import { ClientError, type ClientErrorKind } from '../protocol/errors.js';
import { textOf } from '../protocol/format.js';
import { kindOfAnswer, problemCodeOf } from '../protocol/problems.js';
import type { ClientContext } from './context.js';
import { Progress } from './progress.js';

export interface ApiRequest {
  method: 'GET' | 'POST' | 'DELETE';
  url: string;
  token?: string;
  body?: unknown;
  idempotencyKey?: string;
  /** false: answered as it comes, never retried (a request to this process's own login listener, not a server). */
  retry?: boolean;
}

export interface ApiResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** Parsed JSON, or the text when the body is not JSON. */
  body: unknown;
  text: string;
}

export interface RetryPolicy {
  /** Attempts in all, the first included. */
  attempts: number;
  /** A Retry-After longer than this is not waited for: the command fails and says when to come back. */
  maxWaitMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { attempts: 4, maxWaitMs: 30_000 };

/** Network failures after which the request may be sent again (the server may not have seen it). */
const TRANSIENT_NETWORK = new Set([
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
]);

let undici: Promise<typeof Undici> | undefined;
const loadUndici = () => (undici ??= import('undici'));

/**
 * The client's HTTP: one undici agent per command run (closed at its end so the process exits at once),
 * retries bounded by {@link RetryPolicy}. GETs are retried; a POST only when it carries an Idempotency-Key,
 * because without one a second send may run (and charge) the operation twice.
 */
export class HttpClient {
  #agent: Promise<Agent> | undefined;
  readonly #ctx: ClientContext;
  readonly #retry: RetryPolicy;

  constructor(ctx: ClientContext, retry: RetryPolicy = DEFAULT_RETRY) {
    this.#ctx = ctx;
    this.#retry = retry;
  }

  /** The agent, made with the first request: a command that sends none does not load undici. */
  #dispatcher(): Promise<Agent> {
    this.#agent ??= loadUndici().then(
      ({ Agent }) => new Agent({ keepAliveTimeout: 2_000, connect: { timeout: 10_000 }, headersTimeout: 120_000, bodyTimeout: 120_000 }),
    );
    return this.#agent;
  }

  /** A WHATWG fetch on this client's agent, for oauth4webapi. */
  readonly fetch = async (url: string, init: RequestInit): Promise<Response> => {
    const [{ fetch }, dispatcher] = await Promise.all([loadUndici(), this.#dispatcher()]);
    // Node's global Response is undici's, but a program compiled with the DOM lib (the tests) has the browser's.
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion
    return (await fetch(url, { ...(init as object), dispatcher })) as unknown as Response;
  };

  async close(): Promise<void> {
    if (this.#agent) await (await this.#agent).close();
  }

  /** Sends a request, retrying what may be retried; answers every status (the caller decides what is an error). */
  async send(req: ApiRequest): Promise<ApiResponse> {
    const retryable = req.retry !== false && (req.method === 'GET' || req.idempotencyKey !== undefined);
    for (let attempt = 1; ; attempt++) {
      let response: ApiResponse;
      try {
        response = await this.#once(req);
      } catch (e) {
        const code = networkCode(e);
        if (retryable && attempt < this.#retry.attempts && code && TRANSIENT_NETWORK.has(code)) {
          await this.#wait(backoff(attempt), `connection failed (${code})`, attempt);
          continue;
        }
        throw new ClientError('unreachable', `cannot reach ${new URL(req.url).origin}: ${code ?? (e as Error).message}`);
      }
      const again = response.status === 429 || response.status === 502 || response.status === 503 || response.status === 504;
      if (!again || !retryable || attempt >= this.#retry.attempts) return response;
      const waitMs = retryAfterMs(response.headers['retry-after'], Date.now()) ?? backoff(attempt);
      if (waitMs > this.#retry.maxWaitMs) return response;
      await this.#wait(waitMs, response.status === 429 ? 'rate limited' : `server answered ${response.status}`, attempt);
    }
  }

  async #once(req: ApiRequest): Promise<ApiResponse> {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (req.token) headers.authorization = `Bearer ${req.token}`;
    if (req.idempotencyKey !== undefined) headers['idempotency-key'] = req.idempotencyKey;
    if (req.body !== undefined) headers['content-type'] = 'application/json';
    const [{ request }, dispatcher] = await Promise.all([loadUndici(), this.#dispatcher()]);
    const res = await request(req.url, {
      method: req.method,
      headers,
      body: req.body === undefined ? null : JSON.stringify(req.body),
      dispatcher,
    });
    const text = await res.body.text();
    let body: unknown = text;
    if (/json/i.test(String(res.headers['content-type'] ?? ''))) {
      try {
        body = JSON.parse(text);
      } catch {
        // not JSON after all: keep the text
      }
    }
    return { status: res.statusCode, headers: res.headers, body, text };
  }

  /** One line on stderr while it waits; on a terminal it counts down in place and is cleared when the retry goes out. */
  async #wait(ms: number, why: string, attempt: number): Promise<void> {
    const until = Date.now() + ms;
    // The countdown in whole seconds (rounded up), so it never reads "999 ms" a moment after "2 s". Each tick takes one
    // off: the tick may come a little before a whole second has passed by Date.now() (a timer counts from the loop's
    // cached time), and the time left alone would then still read "2 s". It follows the time left when ticks come late.
    let seconds = Math.ceil(ms / 1_000);
    const left = () => (ms < 1_000 ? formatWait(ms) : `${seconds} s`);
    const line = () => `agent-access: ${why}; retrying in ${left()} (attempt ${attempt + 1} of ${this.#retry.attempts}; Ctrl-C stops)`;
    const progress = new Progress(this.#ctx, line(), { elapsed: false });
    const tick = () => {
      seconds = Math.max(1, Math.min(seconds - 1, Math.ceil((until - Date.now()) / 1_000)));
      progress.update(line());
    };
    const countdown = progress.live ? setInterval(tick, 1_000) : undefined;
    try {
      await sleep(ms);
    } finally {
      clearInterval(countdown);
      progress.stop();
    }
  }
}

const backoff = (attempt: number): number => 500 * 2 ** (attempt - 1);
const formatWait = (ms: number): string => (ms < 1_000 ? `${ms} ms` : `${Math.ceil(ms / 1_000)} s`);

function networkCode(e: unknown): string | undefined {
  const err = e as { code?: string; cause?: { code?: string } };
  return err?.code ?? err?.cause?.code;
}

/** RFC 9110 §10.2.3: delay-seconds or an HTTP-date. */
export function retryAfterMs(value: string | string[] | undefined, now: number): number | null {
  const text = Array.isArray(value) ? value[0] : value;
  if (!text) return null;
  if (/^\d+$/.test(text.trim())) return Number(text.trim()) * 1_000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

/** The auth-params of a `Bearer` challenge (RFC 6750 §3): error, error_description, scope, resource_metadata. */
export function bearerChallenge(header: string | string[] | undefined): Record<string, string> {
  const text = Array.isArray(header) ? header.join(', ') : (header ?? '');
  const params: Record<string, string> = {};
  for (const m of text.matchAll(/([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"/g)) params[m[1]!.toLowerCase()] = m[2]!.replace(/\\(.)/g, '$1');
  return params;
}

/** The human part of an error body: RFC 9457 detail/title, RFC 6749 error_description/error, or the text. */
export function errorDetail(res: ApiResponse): string {
  const b = res.body as Record<string, unknown> | string;
  if (b && typeof b === 'object') {
    for (const key of ['detail', 'error_description', 'title', 'error', 'message']) if (typeof b[key] === 'string' && b[key]) return b[key];
  }
  return typeof b === 'string' && b.trim() ? b.trim().slice(0, 300) : `HTTP ${res.status}`;
}

/**
 * Turns an error response into a plain message and the kind of failure (which the CLI turns into the exit code scripts branch on).
 * 401 → log in again; 403 → the scope or kind of token is wrong; 409 → the key was used for another request;
 * 429 → when to try again.
 */
export function apiError(res: ApiResponse, req: ApiRequest, heldScope = ''): ClientError {
  const route = `${req.method} ${new URL(req.url).pathname}`;
  const challenge = bearerChallenge(res.headers['www-authenticate']);
  const detail = challenge.error_description ?? errorDetail(res);
  // The registry decides the kind (problems.ts), as docs/errors.md's tables say, whenever the answer names its code;
  // an answer that names none goes by its status, as each case below has it.
  const kind = (byStatus: ClientErrorKind): ClientErrorKind =>
    problemCodeOf(res.body) !== undefined ? kindOfAnswer(res.status, res.body) : byStatus;
  switch (res.status) {
    case 401:
      return new ClientError(
        kind('auth_required'),
        `${route}: the service refused the access token (${challenge.error ?? 'no token'}: ${detail}). Run \`agent-access login\` again.`,
        'client.auth_required',
      );
    case 403:
      if (challenge.error === 'insufficient_scope' || challenge.scope) {
        const scope = challenge.scope ?? textOf((res.body as Record<string, unknown> | undefined)?.scope);
        const wanted = [...new Set([...heldScope.split(' '), ...scope.split(' ')].filter(Boolean))].join(' ');
        return new ClientError(
          'denied',
          `${route} needs the scope "${scope}", which this login does not hold. Log in with it: \`agent-access login --scope "${wanted}"\``,
          'client.insufficient_scope',
        );
      }
      return new ClientError(kind('denied'), `${route}: refused (${detail})`, 'client.forbidden');
    case 404:
      return new ClientError(kind('not_found'), `${route}: not found (${detail})`, 'client.not_found');
    case 409:
      return new ClientError(
        kind('conflict'),
        `${route}: conflict: ${detail}. ${
          req.idempotencyKey !== undefined
            ? `The Idempotency-Key "${req.idempotencyKey}" belongs to ` +
              `another request, or that request is still running; use a new key for a new request.`
            : ''
        }`.trim(),
        'client.conflict',
      );
    case 429: {
      const wait = retryAfterMs(res.headers['retry-after'], Date.now());
      const limit = res.headers['ratelimit-limit'];
      return new ClientError(
        kind('rate_limited'),
        `${route}: rate limited${limit ? ` (limit ${String(limit)})` : ''}; try ` +
          `again ${wait === null ? 'later' : `in ${Math.ceil(wait / 1_000)} s`}` +
          `${req.method === 'POST' && req.idempotencyKey === undefined ? ' (a POST without --idempotency-key is never retried automatically)' : ''}`,
        'client.rate_limited',
      );
    }
    default:
      return new ClientError(
        kindOfAnswer(res.status, res.body),
        `${route}: ${res.status >= 500 ? 'server error' : 'refused'} ${res.status}: ${detail}`,
        'client.http_error',
      );
  }
}
