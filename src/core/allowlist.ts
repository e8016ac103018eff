import { composeAnswer, type AskAnswer } from './ask.js';
import { addAmount, DEFAULT_PRICES, type ChargeEntry, type Prices } from './charges.js';
import type { AccessContext, Core } from './core.js';
import { randomToken, sha256 } from './crypto.js';
import { ProblemError } from './errors.js';
import { IDEMPOTENCY_WINDOW, idempotencyId, type StoredResponse } from './idempotency.js';
import { RateLimiter, type RateLimitConfig, type RateLimitState } from './rate-limit.js';
import { SearchIndex } from './search.js';
import type { KnowledgeDocument, Workspace } from './workspace.js';

export interface AllowlistOptions {
  workspace: Workspace;
  knowledge: KnowledgeDocument[];
  prices?: Partial<Prices>;
  /** Per grant; default 60 requests a minute. */
  rateLimit?: RateLimitConfig;
  /** POST /chat/ask is abandoned after this long (real time: a request waits in real time). Default 30 s. */
  askTimeoutMs?: number;
  /** Simulated thinking time of an ask, real time. Default 0. */
  askLatencyMs?: number;
}

/** What an operation hands back: its answer, and what it costs (spec 1). */
export interface OperationResult {
  status: number;
  body: unknown;
  charge?: number;
}

/**
 * The REST allowlist's logic (spec 4.4), shared by the REST routes and (later) the agent tools: rate limits
 * per grant, idempotency per client and route, charges, and the operations themselves.
 */
export class Allowlist {
  readonly search: SearchIndex;
  readonly prices: Prices;
  readonly limiter: RateLimiter;
  readonly askTimeoutMs: number;
  readonly askLatencyMs: number;
  readonly #inFlight = new Set<string>();

  constructor(private readonly core: Core, options: AllowlistOptions) {
    this.search = new SearchIndex(options.workspace, options.knowledge);
    this.prices = { ...DEFAULT_PRICES, ...options.prices };
    this.limiter = new RateLimiter(core.clock, options.rateLimit ?? { limit: 60, windowMs: 60_000 });
    this.askTimeoutMs = options.askTimeoutMs ?? 30_000;
    this.askLatencyMs = options.askLatencyMs ?? 0;
  }

  /** Spec 7, 8: counts the request against its grant's window; throws RateLimitedError over the limit. */
  rateLimit(access: AccessContext): RateLimitState {
    return this.limiter.take(access.grant.id);
  }

  /**
   * Spec 4.4 rule 5. No key: the operation runs and is charged. A key: the first use runs and stores the
   * response; the same key and body again get that response back byte for byte, uncharged; the same key with
   * another body, or while the first is still running, is 409. Records last 24 hours on the clock. Only
   * successful responses are stored, so a failed call may be retried with its key.
   */
  async idempotent(access: AccessContext, route: string, key: string | undefined, rawBody: string, operation: () => Promise<OperationResult>): Promise<{ response: StoredResponse; replayed: boolean }> {
    if (key === undefined) {
      const response = await this.#run(access, route, null, operation);
      return { response, replayed: false };
    }
    const now = this.core.clock.now();
    const id = idempotencyId(access.client_id, route, key);
    const fingerprint = sha256(rawBody);
    const existing = this.core.state.idempotency[id];
    if (existing && existing.expires_at > now) {
      if (existing.fingerprint !== fingerprint) {
        throw new ProblemError(409, 'idempotency_key_reused', `Idempotency-Key "${key}" was already used with a different request body`);
      }
      this.core.events.emit('idempotency.replayed', { client_id: access.client_id, route, key });
      return { response: existing.response, replayed: true };
    }
    if (this.#inFlight.has(id)) throw new ProblemError(409, 'idempotency_key_in_flight', `a request with Idempotency-Key "${key}" is still being processed`);
    this.#inFlight.add(id);
    try {
      const response = await this.#run(access, route, key, operation, (stored) => {
        if (existing) delete this.core.state.idempotency[id];
        this.core.state.idempotency[id] = { client_id: access.client_id, route, key, fingerprint, created_at: now, expires_at: now + IDEMPOTENCY_WINDOW, response: stored };
      });
      return { response, replayed: false };
    } finally {
      this.#inFlight.delete(id);
    }
  }

  async #run(access: AccessContext, route: string, key: string | null, operation: () => Promise<OperationResult>, store?: (response: StoredResponse) => void): Promise<StoredResponse> {
    const result = await operation();
    const response: StoredResponse = { status: result.status, content_type: 'application/json; charset=utf-8', body: JSON.stringify(result.body) };
    if (result.status < 300) {
      store?.(response);
      if (result.charge) this.core.recordCharge(this.#chargeEntry(access, route, result.charge, key));
      await this.core.commit();
    }
    return response;
  }

  #chargeEntry(access: AccessContext, route: string, amount: number, key: string | null): Omit<ChargeEntry, 'seq'> {
    return { at: this.core.clock.now(), client_id: access.client_id, grant_id: access.grant.id, route, amount, unit: 'AKh', idempotency_key: key };
  }

  /** Spec 2.4, 4.4 rules 1–2: a German answer grounded in what search found; read-only; abandoned past the timeout. */
  async ask(question: string): Promise<OperationResult> {
    const answer = (async (): Promise<AskAnswer> => {
      if (this.askLatencyMs > 0) await new Promise((resolve) => setTimeout(resolve, this.askLatencyMs));
      const hits = await this.search.search(question, { limit: 8 });
      return { ...composeAnswer(question, hits, this.core.resource), message_id: `msg_${randomToken(16)}` };
    })();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new ProblemError(504, 'ask_timeout', `the question was abandoned after ${this.askTimeoutMs} ms (ask timeout); nothing was charged`)), this.askTimeoutMs);
    });
    try {
      const body = await Promise.race([answer, timeout]);
      return { status: 200, body, charge: this.prices.ask };
    } finally {
      clearTimeout(timer);
    }
  }
}

export const totalOf = addAmount;
