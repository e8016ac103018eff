import { plural } from '../../protocol/format.js';
import { FINDINGS, SEVERITIES, type Finding, type FindingCode, type FindingSeverity } from '../../protocol/findings.js';
import { HINTS, missingParameterHint, type MissingParameter } from '../oauth/client-hints.js';
import { MINUTE } from '../state/clock.js';
import { idempotencyKeyName } from '../state/idempotency.js';
import type { CoreContext } from '../context.js';
import { sha256 } from '../state/crypto.js';
import { CONCURRENT_WINDOW } from '../oauth/token-family.js';
import type { AppEvent, EventMap } from '../state/events.js';
import type { Grant } from '../state/state.js';

/** This many rotations of one family within one access-token lifetime are a refresh loop. */
export const LOOP_ROTATIONS = 5;
/** This many "refused at the resource, then refreshed" cycles of one family are a refresh loop. */
export const LOOP_CYCLES = 3;
/** The same body charged twice without a key this close together looks like a retry. */
export const UNKEYED_RETRY_WINDOW = 5 * MINUTE;
/** The registration with the same name and redirect URIs from which on it counts as repeated. */
export const REPEATED_REGISTRATIONS = 3;
/** Each detector remembers at most this many families, grants, bodies or names (the oldest go first). */
const MEMORY = 10_000;

const MISSING: ReadonlySet<string> = new Set<MissingParameter>([
  'scope',
  'state',
  'resource',
  'code_challenge',
  'code_challenge_method',
  'redirect_uri',
]);

/** What the findings read of the core (`resource` only once the emulator listens, as requests do). */
export type FindingsContext = Pick<CoreContext, 'clock' | 'events' | 'state' | 'lifetimes' | 'resource' | 'arrivals'>;

interface Observation {
  code: FindingCode;
  client_id: string;
  /** What the finding is about besides the client (a family, a parameter, a route): one finding per subject. */
  subject: string;
  message: string;
  hint: string;
  severity?: FindingSeverity;
  grant_id?: string | null;
  family_id?: string | null;
}

/** A Map that forgets its oldest entries beyond MEMORY. */
class Recent<K, V> extends Map<K, V> {
  override set(key: K, value: V): this {
    this.delete(key);
    super.set(key, value);
    if (this.size > MEMORY) this.delete(this.keys().next().value as K);
    return this;
  }
}

const seconds = (ms: number) => `${Math.round(ms / 100) / 10} s`;

/**
 * Client findings (protocol/findings.ts): watches the core's events for the habits of a client that its developer
 * should change, and records each as a finding. It only reads: what a client receives never depends on it.
 * Kept in memory for the run (a restart or a reset starts afresh); `grant.abandoned` and `scope.unused` describe
 * the run as a whole and are judged when the findings are read.
 */
export class Findings {
  readonly #ctx: FindingsContext;
  readonly #recorded = new Map<string, Finding>();
  /** Judged on reading: replaced by each review. */
  #standing = new Map<string, Finding>();
  // What the detectors remember, each bounded.
  readonly #rotations = new Recent<string, number[]>();
  readonly #refusedSince = new Recent<string, string>();
  readonly #cycles = new Recent<string, number>();
  /** Per grant, its latest 429: until when it asks to wait, and once delivered, the last request that had arrived by then. */
  readonly #waitUntil = new Recent<string, { until: number; at: number; retryAfter: number; deliveredAfter: number | null }>();
  readonly #unkeyed = new Recent<string, number>();
  /** Registrations by name and redirect URIs (their hash: a name and 20 URIs can be 40 KB), as a count. */
  readonly #registrations = new Recent<string, number>();
  /** Grants created in this run, and the scopes each has used. */
  readonly #grants = new Recent<string, Set<string>>();

  constructor(ctx: FindingsContext) {
    this.#ctx = ctx;
    ctx.events.subscribe((event) => this.#observe(event));
  }

  /** Every finding, most severe first, then the newest first; the run-wide ones judged now. */
  list(): Finding[] {
    this.#review();
    return [...this.#recorded.values(), ...this.#standing.values()].sort(
      (a, b) => SEVERITIES.indexOf(a.severity) - SEVERITIES.indexOf(b.severity) || b.last_at - a.last_at || a.id.localeCompare(b.id),
    );
  }

  /** Forgets every finding and what the detectors remember. */
  clear(): void {
    this.#recorded.clear();
    this.#standing.clear();
    this.#forget();
    this.#grants.clear();
  }

  #forget(): void {
    for (const memory of [this.#rotations, this.#refusedSince, this.#cycles, this.#waitUntil, this.#unkeyed, this.#registrations])
      memory.clear();
  }

  #observe(event: AppEvent): void {
    switch (event.name) {
      case 'refresh.refused':
        return this.#refreshRefused(event.data);
      case 'refresh.rotated':
        return this.#rotated(event.data.family_id);
      case 'access.refused':
        return this.#accessRefused(event.data);
      case 'authorize.refused':
        for (const parameter of event.data.missing)
          if (event.data.client_id && MISSING.has(parameter))
            this.#missingParameter(event.data.client_id, parameter as MissingParameter, event.data.error);
        return;
      case 'consent.shown':
        if (event.data.resource === null) this.#missingParameter(event.data.client_id, 'resource', null);
        return;
      case 'rate_limit.exceeded': {
        this.#early(event.data);
        // A 429 delivered before and still in force keeps deciding what came after it, until this one is delivered.
        const before = this.#waitUntil.get(event.data.grant_id);
        this.#waitUntil.set(event.data.grant_id, {
          until: this.#now() + event.data.retry_after * 1000,
          at: this.#now(),
          retryAfter: event.data.retry_after,
          deliveredAfter: before && this.#now() < before.until ? before.deliveredAfter : null,
        });
        return;
      }
      case 'request.served': {
        // The 429 reached the client: what the same grant sends from now on is a reaction to it. Requests that
        // arrived before this moment were sent before the client could know of it, whenever they are admitted.
        const waiting = event.data.grant_id ? this.#waitUntil.get(event.data.grant_id) : undefined;
        if (waiting && waiting.deliveredAfter === null && event.data.status === 429) waiting.deliveredAfter = this.#ctx.arrivals.last;
        return;
      }
      case 'request.admitted':
        this.#early(event.data);
        this.#grants.get(event.data.grant_id)?.add(event.data.scope);
        return;
      case 'action.pending':
        this.#grants.get(event.data.grant_id)?.add('workspace.write');
        return;
      case 'charge.recorded':
        if (event.data.body_sha256) this.#charged(event.data);
        return;
      case 'client.registered':
        return this.#registered(event.data);
      case 'grant.created':
        this.#grants.set(event.data.grant_id, new Set());
        return;
      case 'state.restored':
        if (event.data.reset) this.clear();
        else this.#forget();
        return;
      default:
        return;
    }
  }

  // ---- refresh tokens (spec 3.2) ---------------------------------------------------------------

  #refreshRefused(data: EventMap['refresh.refused']): void {
    const where = { client_id: data.client_id, grant_id: data.grant_id, family_id: data.family_id, subject: data.family_id };
    const concurrent = data.since_ms !== null && data.since_ms <= CONCURRENT_WINDOW;
    if (data.reason === 'replay' && concurrent) {
      this.#record({
        ...where,
        code: 'refresh.concurrent',
        message:
          `A refresh token${data.generation !== null ? ` (generation ${data.generation})` : ''} was presented ` +
          `again ${seconds(data.since_ms!)} after it was rotated: the client refreshes in parallel with one token, and the replay rule ` +
          `invalidated the whole family.`,
        hint: HINTS.concurrentRefresh,
      });
    } else if (data.reason === 'replay') {
      this.#record({
        ...where,
        code: 'refresh.stale_token',
        message:
          `A refresh token ` +
          `rotated ${
            data.since_ms !== null ? `${seconds(data.since_ms)} before` : 'long before'
          }${data.generation !== null ? ` (generation ${data.generation})` : ''} was presented again: the client did not keep the newest ` +
          `one, and the replay rule invalidated the whole family.`,
        hint: HINTS.staleRefreshToken,
      });
    } else if (data.reason === 'family_invalidated' && concurrent) {
      // Another of the parallel refreshes, arriving after the replay that ended the family.
      const earlier = this.#recorded.get(findingId('refresh.concurrent', data.client_id, data.family_id));
      if (earlier && this.#ctx.state.families[data.family_id]?.invalidated_reason === 'refresh_replay')
        this.#record({ ...where, code: 'refresh.concurrent', message: earlier.message, hint: HINTS.concurrentRefresh });
    }
  }

  #rotated(familyId: string): void {
    const family = this.#ctx.state.families[familyId];
    if (!family) return;
    const now = this.#now();
    const times = [...(this.#rotations.get(familyId) ?? []), now].slice(-LOOP_ROTATIONS);
    const where = { client_id: family.client_id, grant_id: family.grant_id, family_id: familyId, subject: familyId };
    if (times.length === LOOP_ROTATIONS && now - times[0]! < this.#ctx.lifetimes.accessToken) {
      this.#rotations.delete(familyId);
      this.#record({
        ...where,
        code: 'refresh.loop',
        message:
          `The family was refreshed ${LOOP_ROTATIONS} times within ${seconds(now - times[0]!)}, while each access token ` +
          `lasts ${seconds(this.#ctx.lifetimes.accessToken)}.`,
        hint: HINTS.refreshLoop,
      });
    } else this.#rotations.set(familyId, times);
    const refusal = this.#refusedSince.get(familyId);
    if (refusal === undefined) return;
    this.#refusedSince.delete(familyId);
    const cycles = (this.#cycles.get(familyId) ?? 0) + 1;
    if (cycles < LOOP_CYCLES) {
      this.#cycles.set(familyId, cycles);
      return;
    }
    this.#cycles.delete(familyId);
    this.#record({
      ...where,
      code: 'refresh.loop',
      message: `The family was refreshed after each refusal at the resource (${refusal}), ${LOOP_CYCLES} times in a row: a refresh does not cure that refusal.`,
      hint: HINTS.refreshLoop,
    });
  }

  // ---- the resource guard (spec 5.5, 5.8) -------------------------------------------------------

  #accessRefused(data: EventMap['access.refused']): void {
    if (!data.client_id) return;
    if (data.family_id && data.reason !== 'token_expired') this.#refusedSince.set(data.family_id, `${data.reason} at ${data.where}`);
    if (data.reason !== 'identity_token') return;
    this.#record({
      code: 'token.identity_at_resource',
      client_id: data.client_id,
      grant_id: data.grant_id,
      family_id: data.family_id,
      subject: data.grant_id ?? '',
      message: `An identity token (issued without resource) was presented at ${data.where}, where only agent tokens for ${this.#ctx.resource} are accepted.`,
      hint: HINTS.identityToken(this.#ctx.resource),
    });
  }

  // ---- the authorization request (spec 4.2) -----------------------------------------------------

  #missingParameter(clientId: string, parameter: MissingParameter, error: string | null): void {
    this.#record({
      code: 'authorize.missing_parameter',
      client_id: clientId,
      subject: parameter,
      severity: error === null ? 'warning' : 'error',
      message:
        error === null
          ? 'An authorization request came without resource: its grant gives identity tokens, which /mcp and the REST routes refuse.'
          : `An authorization request came without ${parameter} and was refused (${error}).`,
      hint: missingParameterHint(parameter, this.#ctx.resource),
    });
  }

  // ---- rate limits (spec 7, 8) ------------------------------------------------------------------

  /** RFC 9110 §10.2.3: a request that arrived after its grant's 429 was delivered, and before its Retry-After. */
  #early({ client_id: clientId, grant_id: grantId, arrival }: { client_id: string; grant_id: string; arrival: number }): void {
    const waiting = this.#waitUntil.get(grantId);
    if (waiting?.deliveredAfter == null || arrival <= waiting.deliveredAfter) return;
    const now = this.#now();
    if (now >= waiting.until) {
      this.#waitUntil.delete(grantId);
      return;
    }
    this.#record({
      code: 'ratelimit.retry_too_early',
      client_id: clientId,
      grant_id: grantId,
      subject: grantId,
      message: `A request came ${seconds(now - waiting.at)} after a 429 whose Retry-After asked to wait ${waiting.retryAfter} s.`,
      hint: HINTS.retryTooEarly,
    });
  }

  // ---- charges and idempotency (spec 1, 4.4 rule 5) ---------------------------------------------

  #charged(data: EventMap['charge.recorded']): void {
    const key = `${data.client_id}\n${data.route}\n${data.body_sha256}`;
    const previous = this.#unkeyed.get(key);
    this.#unkeyed.set(key, data.at);
    if (previous === undefined || data.at - previous > UNKEYED_RETRY_WINDOW) return;
    this.#record({
      code: 'idempotency.retry_without_key',
      client_id: data.client_id,
      grant_id: data.grant_id,
      subject: data.route,
      message:
        idempotencyKeyName(data.route) === 'idempotency_key'
          ? `The same arguments were sent to the MCP ${data.route} again ${seconds(data.at - previous)} later without idempotency_key, ` +
            `and charged again (${data.amount} ${data.unit}).`
          : `The same request body was sent to ${data.route} again ${seconds(data.at - previous)} later without Idempotency-Key, and ` +
            `charged again (${data.amount} ${data.unit}).`,
      hint: HINTS.retryWithoutKey(idempotencyKeyName(data.route)),
    });
  }

  // ---- registration (spec 4.1) ------------------------------------------------------------------

  #registered(data: EventMap['client.registered']): void {
    const key = softwareOf(data);
    // A count, not the list of clients: copying a growing list made each registration slower than the last.
    const hash = sha256(key);
    const count = (this.#registrations.get(hash) ?? 0) + 1;
    this.#registrations.set(hash, count);
    if (count < REPEATED_REGISTRATIONS) return;
    this.#record(
      {
        code: 'registration.repeated',
        client_id: data.client_id,
        subject: key,
        message:
          `“${data.client_name}” was registered ${count} times with the same redirect URIs; each registration is another ` +
          `unverified application the person sees.`,
        hint: HINTS.repeatedRegistration,
      },
      count - REPEATED_REGISTRATIONS + 1,
    );
  }

  // ---- the run as a whole: judged when read (spec 3.3, 5.9) -------------------------------------

  #review(): void {
    const standing = new Map<string, Finding>();
    const keep = (observation: Observation) => {
      const id = findingId(observation.code, observation.client_id, observation.subject);
      const earlier = this.#standing.get(id);
      const finding = earlier ?? this.#finding(id, observation, 1);
      standing.set(id, finding);
      if (!earlier) this.#ctx.events.emit('finding.recorded', finding);
    };
    const { grants, clients, families } = this.#ctx.state;
    /**
     * A grant's software and person: a client that registers anew at each login (the MCP Inspector's --relogin) is
     * the same software (the same name and redirect URIs), so its old grants are judged with its new ones.
     */
    const holder = (grant: Grant) => {
      const client = clients[grant.client_id];
      return `${client ? softwareOf(client) : grant.client_id}\n${grant.person_id}`;
    };
    /** For each software and person, its newest grant of this run. */
    const newest = new Map<string, Grant>();
    let exchanged: Set<string> | undefined;
    for (const [grantId, used] of this.#grants) {
      const grant = grants[grantId];
      if (!grant) continue;
      const key = holder(grant);
      const latest = newest.get(key);
      if (!latest || grant.created_at >= latest.created_at) newest.set(key, grant);
      const unused = grant.resource === null ? [] : grant.scopes.filter((s) => !used.has(s));
      if (unused.length === 0) continue;
      // A grant whose code never became tokens could not have used any scope: say that, not "unused".
      exchanged ??= new Set(Object.values(families).map((f) => f.grant_id));
      keep({
        code: 'scope.unused',
        client_id: grant.client_id,
        grant_id: grant.id,
        subject: grant.id,
        message: exchanged.has(grant.id)
          ? `The grant holds ${unused.map((s) => `“${s}”`).join(', ')}, which no request of it has used.`
          : `The grant holds ${unused.map((s) => `“${s}”`).join(', ')}, but its authorization code was never exchanged for tokens, so ` +
            `nothing could use them.`,
        hint: exchanged.has(grant.id) ? HINTS.unusedScope : HINTS.codeNeverExchanged,
      });
    }
    /** Per software and person, the older grants still active and not used since its newest grant. */
    const leftActive = new Map<string, Grant[]>();
    if (newest.size > 0)
      for (const grant of Object.values(grants)) {
        if (grant.status !== 'active') continue;
        const key = holder(grant);
        const latest = newest.get(key)?.created_at;
        // Judged against the newest grant: a grant used since then is still in use (another session of the software).
        if (latest === undefined || latest <= grant.created_at || (grant.last_used_at ?? grant.created_at) >= latest) continue;
        leftActive.set(key, [...(leftActive.get(key) ?? []), grant]);
      }
    for (const [key, old] of leftActive) {
      const latest = newest.get(key)!;
      const names = old.map((g) => (g.client_id === latest.client_id ? g.id : `${g.id} (client ${g.client_id})`));
      for (const grant of old)
        keep({
          code: 'grant.abandoned',
          client_id: grant.client_id,
          grant_id: grant.id,
          subject: grant.id,
          message:
            grant.client_id === latest.client_id
              ? `The client was granted access again for the same person ` +
                `(grant ${latest.id}), while ${plural(old.length, 'older grant')} ${old.length === 1 ? 'stays' : 'stay'} active and ` +
                `unused since: ${names.join(', ')}.`
              : `The same software (same name and redirect URIs) registered again as client ${latest.client_id} and was granted access ` +
                `for the same person (grant ${latest.id}), while ${plural(
                  old.length,
                  'older grant',
                )} ${old.length === 1 ? 'stays' : 'stay'} active and unused since: ${names.join(', ')}.`,
          hint: HINTS.abandonedGrant,
        });
    }
    this.#standing = standing;
  }

  // ---- recording --------------------------------------------------------------------------------

  /** Records an observation, or counts it again (`count`: the count to set instead of one more). */
  #record(observation: Observation, count?: number): void {
    const id = findingId(observation.code, observation.client_id, observation.subject);
    const earlier = this.#recorded.get(id);
    const finding: Finding = earlier
      ? {
          ...earlier,
          client_id: observation.client_id,
          count: count ?? earlier.count + 1,
          last_at: this.#now(),
          message: observation.message,
        }
      : this.#finding(id, observation, count ?? 1);
    this.#recorded.set(id, finding);
    this.#ctx.events.emit('finding.recorded', finding);
  }

  #finding(id: string, observation: Observation, count: number): Finding {
    const now = this.#now();
    return {
      id,
      code: observation.code,
      severity: observation.severity ?? FINDINGS[observation.code].severity,
      client_id: observation.client_id,
      client_name: this.#ctx.state.clients[observation.client_id]?.client_name ?? null,
      grant_id: observation.grant_id ?? null,
      family_id: observation.family_id ?? null,
      count,
      first_at: now,
      last_at: now,
      message: observation.message,
      hint: observation.hint,
      spec: FINDINGS[observation.code].spec,
    };
  }

  #now(): number {
    return this.#ctx.clock.now();
  }
}

/** One finding per code, client and subject; a repeated registration spans clients: one per name and redirect URIs. */
/** What makes two registrations the same software: the name and the redirect URIs, in any order. */
const softwareOf = (client: { client_name: string; redirect_uris: readonly string[] }): string =>
  `${client.client_name}\n${[...client.redirect_uris].sort().join('\n')}`;

function findingId(code: FindingCode, clientId: string, subject: string): string {
  return code === 'registration.repeated' ? `${code}:${sha256(subject).slice(0, 12)}` : `${code}:${clientId}:${subject}`;
}
