import type { CoreContext } from '../context.js';
import { revokeGrant } from '../oauth/grants-admin.js';
import { replayStoredRefreshToken } from '../oauth/token-family.js';
import { ProblemError } from '../state/errors.js';
import { GRANT_KINDS, parseFaultSpec, type FaultKind, type FaultSettings, type FaultSpec } from './fault-spec.js';
import type { FaultView } from './overview.js';
import type { FaultContext, FaultPoint } from '../resources/fault-point.js';

/**
 * Faults on purpose (emulator control, not part of the service): the service misbehaves the way the real one can,
 * deterministically, so a client's handling of it can be tested. Request faults fire on matching requests; the
 * grant faults (a stored refresh-token replay, a revocation) fire at a chosen moment.
 */
export interface Fault extends FaultSettings {
  id: string;
  created_at: number;
  /** Matching requests seen (for `rate`), requests of the grant counted (for `after_requests`). */
  seen: number;
  fired: number;
  last_fired_at: number | null;
  state: 'armed' | 'spent' | 'cleared';
  /** One line for logs and the dashboard: what it does and to what. */
  description: string;
}

const REQUEST_KINDS: readonly FaultKind[] = ['rate_limit', 'server_error', 'latency', 'drop_response', 'ask_timeout', 'research_fail'];
export const FAULT_LIMIT = 100;

/** `/research/:job_id` → `/research/{job_id}`: routes as the spec writes them. */
const specStyle = (template: string): string => template.replace(/:([A-Za-z_]+)/g, '{$1}');

function routeMatches(pattern: string | null, ctx: FaultContext): boolean {
  if (pattern === null || pattern === '*') return true;
  const space = pattern.indexOf(' ');
  const method = space > 0 ? pattern.slice(0, space) : null;
  const path = space > 0 ? pattern.slice(space + 1) : pattern;
  if (method && method !== ctx.method) return false;
  const candidates = [ctx.path, ctx.route, ctx.route ? specStyle(ctx.route) : undefined].filter((c): c is string => c !== undefined);
  if (path === '*') return true;
  if (path.endsWith('*')) return candidates.some((c) => c.startsWith(path.slice(0, -1)));
  return candidates.includes(path);
}

function describe(f: Omit<Fault, 'description'>): string {
  const where = [
    f.route && f.route !== '*' ? ` on ${f.route}` : '',
    f.tool ? ` on ${f.tool === '*' ? 'every tool' : `tool ${f.tool}`}` : '',
  ]
    .filter(Boolean)
    .join(',');
  const who = [
    f.client_id ? `client ${f.client_id}` : '',
    f.kind !== 'revoke' && f.kind !== 'refresh_replay' && f.grant_id ? `grant ${f.grant_id}` : '',
  ]
    .filter(Boolean)
    .join(', ');
  const scope = `${who ? ` for ${who}` : ''}${f.match ? ` when the question contains "${f.match}"` : ''}`;
  const how = [f.count !== null ? `${f.count}×` : '', f.rate !== null && f.rate < 1 ? `${Math.round(f.rate * 100)}% of requests` : '']
    .filter(Boolean)
    .join(', ');
  const suffix = how ? ` (${how})` : '';
  const when =
    f.after_requests !== null ? `after ${f.after_requests} more requests` : f.at !== null ? `at ${new Date(f.at).toISOString()}` : '';
  switch (f.kind) {
    case 'rate_limit':
      return `429 Too Many Requests${where || ' on rate-limited routes'}${scope}${suffix}`;
    case 'server_error':
      return `${f.status} server error${where || ' on every route'}${scope}${suffix}`;
    case 'latency':
      return `+${f.ms} ms latency${where || ' on every route'}${scope}${suffix}`;
    case 'drop_response':
      return `answer lost: connection closed once the call is committed${where || ' on calls that take an idempotency key'}${scope}${suffix}`;
    case 'ask_timeout':
      return `ask abandoned as timed out${scope}${suffix}`;
    case 'research_fail':
      return `research job fails${scope}${suffix}`;
    case 'refresh_replay':
      return `a rotated refresh token of grant ${f.grant_id} is replayed ${when}: its token family dies`;
    case 'revoke':
      return `the person revokes grant ${f.grant_id} ${when}`;
  }
}

/**
 * The faults in force, kept in memory (a restart forgets them). `take` is asked by the adapters at each point a
 * fault can apply; firing is published as `fault.fired`, with what it hit, for the request log and the dashboard.
 */
export class Faults implements FaultPoint {
  readonly #faults = new Map<string, Fault>();
  #seq = 0;

  constructor(private readonly core: CoreContext) {}

  arm(spec: FaultSpec): Fault {
    const now = this.core.clock.now();
    const parsed = parseFaultSpec(spec, now);
    if (parsed.grant_id !== null && GRANT_KINDS.includes(parsed.kind) && !Object.hasOwn(this.core.state.grants, parsed.grant_id)) {
      throw new ProblemError('grant_not_found', `no grant with id "${parsed.grant_id}"`);
    }
    // A replay "now" with nothing to replay would report a fault that did nothing.
    const liveFamily = Object.values(this.core.state.families).some((f) => f.grant_id === parsed.grant_id && f.status === 'active');
    if (parsed.kind === 'refresh_replay' && parsed.at !== null && parsed.at <= now && !liveFamily) {
      throw new ProblemError(
        'token_family_missing',
        `grant "${parsed.grant_id}" has no live token family whose refresh token could be replayed`,
      );
    }
    this.#dropEnded();
    if (this.#faults.size >= FAULT_LIMIT)
      throw new ProblemError('fault_limit_reached', `at most ${FAULT_LIMIT} faults at once; clear some first`);
    const base = {
      ...parsed,
      id: `fault_${++this.#seq}`,
      created_at: now,
      seen: 0,
      fired: 0,
      last_fired_at: null,
      state: 'armed' as const,
    };
    const fault: Fault = { ...base, description: describe(base) };
    this.#faults.set(fault.id, fault);
    this.core.events.emit('fault.armed', { fault_id: fault.id, kind: fault.kind, description: fault.description, remaining: fault.count });
    return fault;
  }

  /** Every fault in the order armed, the ended ones still kept for the record. */
  list(): Fault[] {
    return [...this.#faults.values()];
  }

  /** The faults as the dashboard lists them. */
  views(): FaultView[] {
    return this.list().map((f) => ({
      id: f.id,
      kind: f.kind,
      description: f.description,
      state: f.state,
      fired: f.fired,
      remaining: f.count === null ? null : f.count - f.fired,
      created_at: f.created_at,
      last_fired_at: f.last_fired_at,
    }));
  }

  get(id: string): Fault | undefined {
    return this.#faults.get(id);
  }

  /** Clears one fault (404 if unknown) or, without an id, every armed one. */
  clear(id?: string): Fault[] {
    const targets = id === undefined ? [...this.#faults.values()].filter((f) => f.state === 'armed') : [this.#faults.get(id)];
    if (targets[0] === undefined && id !== undefined) throw new ProblemError('fault_not_found', `no fault with id "${id}"`);
    const cleared: Fault[] = [];
    for (const fault of targets as Fault[]) {
      if (fault.state !== 'armed') continue;
      fault.state = 'cleared';
      this.core.events.emit('fault.cleared', { fault_id: fault.id, kind: fault.kind });
      cleared.push(fault);
    }
    return cleared;
  }

  /** Whether any fault is armed: the hot paths skip everything else when none is. */
  get armed(): boolean {
    for (const f of this.#faults.values()) if (f.state === 'armed') return true;
    return false;
  }

  /**
   * The first armed fault of `kind` that applies to this request, counted as fired; null if none does. With
   * `rate`, the fault fires on an evenly spread share of the matching requests (deterministic, no randomness).
   */
  take(kind: FaultKind, ctx: FaultContext): Fault | null {
    for (const fault of this.#faults.values()) {
      if (fault.state !== 'armed' || fault.kind !== kind || !this.#applies(fault, ctx)) continue;
      fault.seen++;
      // The epsilon keeps 0.29 × 100 at 29 despite binary fractions.
      if (fault.rate !== null && Math.floor(fault.seen * fault.rate + 1e-9) === Math.floor((fault.seen - 1) * fault.rate + 1e-9)) continue;
      this.#fired(fault, ctx);
      return fault;
    }
    return null;
  }

  #applies(fault: Fault, ctx: FaultContext): boolean {
    if (fault.client_id !== null && fault.client_id !== ctx.client_id) return false;
    if (fault.grant_id !== null && fault.grant_id !== ctx.grant_id) return false;
    if (fault.match !== null && !(ctx.question ?? '').toLowerCase().includes(fault.match.toLowerCase())) return false;
    if (fault.tool !== null && (ctx.tool === undefined || (fault.tool !== '*' && fault.tool !== ctx.tool))) return false;
    return REQUEST_KINDS.includes(fault.kind) ? routeMatches(fault.route, ctx) : true;
  }

  #fired(fault: Fault, ctx: FaultContext): void {
    fault.fired++;
    fault.last_fired_at = this.core.clock.now();
    if (fault.count !== null && fault.fired >= fault.count) fault.state = 'spent';
    this.core.events.emit('fault.fired', {
      fault_id: fault.id,
      kind: fault.kind,
      description: fault.description,
      state: fault.state,
      remaining: fault.count === null ? null : fault.count - fault.fired,
      ...(ctx.method ? { method: ctx.method } : {}),
      ...(ctx.path ? { path: ctx.path } : {}),
      ...(ctx.tool ? { tool: ctx.tool } : {}),
      ...(ctx.client_id ? { client_id: ctx.client_id } : {}),
      ...(ctx.grant_id ? { grant_id: ctx.grant_id } : {}),
    });
  }

  /** The soonest time a grant fault is due, for callers that check before a request (null: none scheduled). */
  get nextDue(): number | null {
    let next: number | null = null;
    for (const f of this.#faults.values()) if (f.state === 'armed' && f.at !== null && (next === null || f.at < next)) next = f.at;
    return next;
  }

  /** Fires the grant faults whose moment has come on the clock; returns them. */
  async runDue(): Promise<Fault[]> {
    const now = this.core.clock.now();
    const fired: Fault[] = [];
    for (const fault of this.#faults.values()) {
      if (fault.state === 'armed' && fault.at !== null && fault.at <= now) {
        await this.#act(fault);
        fired.push(fault);
      }
    }
    return fired;
  }

  /**
   * Counts an answered request that carried one of the grant's access tokens (any route, any status; token
   * refreshes are not such requests) and fires the faults waiting for that many. Requests already in flight when it
   * fires are answered as before; the next one is refused.
   */
  async countRequest(grantId: string): Promise<void> {
    for (const fault of this.#faults.values()) {
      if (fault.state !== 'armed' || fault.after_requests === null || fault.grant_id !== grantId) continue;
      fault.seen++;
      if (fault.seen >= fault.after_requests) await this.#act(fault);
    }
  }

  async #act(fault: Fault): Promise<void> {
    fault.state = 'spent';
    const grantId = fault.grant_id!;
    this.#fired(fault, { grant_id: grantId, client_id: this.core.state.grants[grantId]?.client_id });
    if (fault.kind === 'revoke') await revokeGrant(this.core, grantId, 'person').catch(() => undefined);
    else {
      replayStoredRefreshToken(this.core, grantId);
      await this.core.commit();
    }
  }

  /** Ended faults are kept for the record, the oldest dropped first when the list is full. */
  #dropEnded(): void {
    for (const [id, f] of this.#faults) {
      if (this.#faults.size < FAULT_LIMIT) return;
      if (f.state !== 'armed') this.#faults.delete(id);
    }
  }
}
