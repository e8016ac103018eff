import type { ChargeEntry } from '../state/charges.js';
import type { CoreContext } from '../context.js';
import { sha256 } from '../state/crypto.js';
import { ProblemError } from '../state/errors.js';
import type { FaultContext, FaultPoint, ResourceFaultKind } from './fault-point.js';
import {
  IDEMPOTENCY_WINDOW,
  checkIdempotencyKey,
  idempotencyId,
  idempotencyKeyName,
  storedResult,
  toolOfMeter,
  type StoredResult,
} from '../state/idempotency.js';
import { RateLimitedError, RateLimiter, type RateLimitConfig, type RateLimitState } from '../state/rate-limit.js';
import type { AccessContext } from '../oauth/resource-guard.js';

/** What an operation answers: the object the service hands out, in its variant's shape with --vary-unspecified. */
export interface Answer<T> {
  value: T | Record<string, unknown>;
  /** With --vary-unspecified: what the value varied (the Agent-Access-Variant header, the tools' `_meta`). */
  variant?: string;
}

/** An answer and what it costs (spec 1), in AKh. */
export interface Charged<T> extends Answer<T> {
  charge?: number;
}

/** What a metered call hands its transport: the answer, and whether it is a replay of a stored one (spec 4.4 rule 5). */
export interface Metered<T> extends Answer<T> {
  replayed: boolean;
  /**
   * A drop_response fault fired (emulator control): the call is carried out and durable, and the transport closes
   * the connection instead of answering, so the client sees its answer lost.
   */
  lost?: true;
}

/** Where a request is admitted: the scope it was admitted with, and how the rate limit, its faults and events name it. */
export interface Gate {
  scope: string;
  /** `METHOD /path` as the spec writes it, which rate_limit faults match (MCP tool calls: `POST /mcp`). */
  route: string;
  /** The path as sent, if it differs from the template. */
  path?: string;
  /** The name charges, idempotency records and events carry: the REST route, or `tool <name>`. */
  meter: string;
}

/** A metered operation's call: under which name it is kept, its Idempotency-Key, and the request body as sent. */
export interface Call {
  meter: string;
  /** `METHOD /path` it is served on, which drop_response faults match, if not its meter (MCP tool calls: `POST /mcp`). */
  route?: string;
  key: string | undefined;
  /** The exact bytes (REST) or the arguments as JSON (MCP) that a key's later uses must repeat. */
  body: string;
}

/** A fault of `kind` for this caller's request, if one fires; recorded on the request for the log. */
export function requestFault(faults: FaultPoint | undefined, kind: ResourceFaultKind, access: AccessContext, ctx: FaultContext) {
  if (!faults?.armed) return null;
  const fault = faults.take(kind, { ...ctx, client_id: access.client_id, grant_id: access.grant.id });
  if (fault) access.faults.push(`${fault.id} ${fault.kind}`);
  return fault;
}

/**
 * The metered call that the REST routes and the agent tools share (spec 1, 4.4, 7, 8), in two steps because REST
 * refuses before it reads a body (spec 5.5): `admit`, once the bearer token and its scope passed the
 * resource guard (resource-guard.ts: `authenticate`, `checkScope`), counts the request against its grant's rate limit; `run` then applies
 * idempotency, runs the operation, records its charge and commits. Each transport renders what comes back.
 */
export class Metering {
  readonly limiter: RateLimiter;
  readonly #inFlight = new Set<string>();

  constructor(
    private readonly core: CoreContext,
    rateLimit: RateLimitConfig,
    private readonly faults?: FaultPoint,
  ) {
    this.limiter = new RateLimiter(core.clock, rateLimit);
  }

  /**
   * Spec 7, 8: the grant's window (the scope was checked before, by `checkScope`): RateLimitedError over the
   * limit or when a rate_limit fault fires, published as `rate_limit.exceeded`. Answers the window's state for the
   * RateLimit-* headers.
   */
  admit(access: AccessContext, gate: Gate): RateLimitState {
    // A call that no transport numbered arrives as it is admitted.
    const arrival = access.arrival ?? this.core.arrivals.next();
    const who = { client_id: access.client_id, grant_id: access.grant.id, route: gate.meter, arrival };
    let window: RateLimitState;
    try {
      const [method, template] = gate.route.split(' ');
      const fault = requestFault(this.faults, 'rate_limit', access, {
        method,
        route: template,
        path: gate.path ?? template,
        tool: toolOfMeter(gate.meter),
      });
      if (fault) throw new RateLimitedError({ limit: this.limiter.config.limit, remaining: 0, reset: fault.retry_after ?? 1 });
      window = this.limiter.take(access.grant.id);
    } catch (e) {
      if (e instanceof RateLimitedError) this.core.events.emit('rate_limit.exceeded', { ...who, retry_after: e.state.reset });
      throw e;
    }
    this.core.events.emit('request.admitted', { ...who, scope: gate.scope });
    return window;
  }

  /**
   * Spec 4.4 rule 5. No key: the operation runs and is charged. A key: the first use runs and stores its result;
   * the same key and body again get that result back, uncharged, the operation not run; the same key with another
   * body, or while the first is still running, is refused (`idempotency_key_reused`, `idempotency_key_in_flight`).
   * Records last 24 hours on the clock. Only answers are stored (a refusal throws), so a refused call may be retried
   * with its key. An answer a drop_response fault hits comes back `lost`, once it is durable.
   */
  async run<T>(access: AccessContext, call: Call, operation: () => Promise<Charged<T>>): Promise<Metered<T>> {
    const metered = await this.#run(access, call, operation);
    if (!this.faults?.armed) return metered;
    // After the answer is durable, so a retry with the key finds it stored (the lost-answer case a client must survive).
    const [method, route] = (call.route ?? call.meter).split(' ');
    return requestFault(this.faults, 'drop_response', access, { method, route, path: route, tool: toolOfMeter(call.meter) })
      ? { ...metered, lost: true }
      : metered;
  }

  async #run<T>(access: AccessContext, call: Call, operation: () => Promise<Charged<T>>): Promise<Metered<T>> {
    if (call.key === undefined) return { ...(await this.#charge(access, call, null, operation)), replayed: false };
    const key = checkIdempotencyKey(call.key);
    const named = idempotencyKeyName(call.meter);
    const now = this.core.clock.now();
    const id = idempotencyId(access.client_id, access.person_id, call.meter, key);
    const fingerprint = sha256(call.body);
    // In flight first: until the first answer is durable, a duplicate is told to wait, never replayed.
    if (this.#inFlight.has(id))
      throw new ProblemError(
        'idempotency_key_in_flight',
        `a request with ${named} "${key}" is still being processed`,
        'Wait for the first request with this key to be answered, then retry with the same key and body to get its stored answer.',
      );
    const existing = this.core.repo.get('idempotency', id);
    if (existing && existing.expires_at > now) {
      if (existing.fingerprint !== fingerprint)
        throw new ProblemError(
          'idempotency_key_reused',
          named === 'idempotency_key'
            ? `idempotency_key "${key}" was already used with different arguments`
            : `Idempotency-Key "${key}" was already used with a different request body`,
          named === 'idempotency_key'
            ? 'Use a fresh idempotency_key for each new operation; repeat a key only to retry the same call with the same arguments.'
            : 'Use a fresh Idempotency-Key for each new operation; repeat a key only to retry the same request with a byte-identical body.',
        );
      this.core.events.emit('idempotency.replayed', { client_id: access.client_id, grant_id: access.grant.id, route: call.meter, key });
      return { ...(storedResult(existing) as Answer<T>), replayed: true };
    }
    this.#inFlight.add(id);
    try {
      const answer = await this.#charge(access, call, key, operation, (result) => {
        this.core.repo.put('idempotency', id, {
          client_id: access.client_id,
          route: call.meter,
          key,
          fingerprint,
          created_at: now,
          expires_at: now + IDEMPOTENCY_WINDOW,
          result,
        });
      });
      return { ...answer, replayed: false };
    } finally {
      this.#inFlight.delete(id);
    }
  }

  /** Runs the operation; its answer is stored (with a key), charged and durable together, before it is handed out. */
  async #charge<T>(
    access: AccessContext,
    call: Call,
    key: string | null,
    operation: () => Promise<Charged<T>>,
    store?: (result: StoredResult) => void,
  ): Promise<Answer<T>> {
    const { charge, ...answer } = await operation();
    store?.(answer);
    // Without a key the body's hash goes with the charge's event, so that a retry without a key can be told (findings).
    if (charge) this.core.recordCharge(this.#chargeEntry(access, call.meter, charge, key), key === null ? sha256(call.body) : undefined);
    await this.core.commit();
    return answer;
  }

  #chargeEntry(access: AccessContext, route: string, amount: number, key: string | null): Omit<ChargeEntry, 'seq'> {
    return {
      at: this.core.clock.now(),
      client_id: access.client_id,
      grant_id: access.grant.id,
      route,
      amount,
      unit: 'AKh',
      idempotency_key: key,
    };
  }
}
