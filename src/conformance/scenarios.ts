import { plural } from '../protocol/format.js';
import type { EmulatorOptions, Emulator } from '../server/emulator.js';
import type { FaultSpec } from '../core/emulation/fault-spec.js';
import { sha256 } from '../core/state/crypto.js';
import { isRetiredScope, isSupportedScope } from '../core/oauth/scopes.js';
import { missingParameterHint, type MissingParameter } from '../core/oauth/client-hints.js';
import { selectVariant } from '../core/emulation/variation.js';
import { idempotencyKeyName } from '../core/state/idempotency.js';
import { TOOL_SCOPES, type ToolName } from '../server/mcp-tools.js';
import type { ObservedExchange } from '../server/observer.js';
import { CHECKS, type CheckId } from './checks.js';
import type { CheckReport, Verdict } from './report.js';
import { RunLog, callOf, mostInFlight, type Call, type SteppedClock } from './run-log.js';

/** One run of the command against a scenario's emulator, as the checks see it. */
export interface ScenarioRun {
  log: RunLog;
  /** null: killed at the timeout, or never started. */
  exitCode: number | null;
  timedOut: boolean;
  baseUrl: string;
  /** `{base_url}/mcp`. */
  resource: string;
  /** The seed of a `--vary-unspecified` run. */
  seed?: number;
}

/** What a scenario may do while the command runs. */
export interface Arming {
  emulator: Emulator;
  clock: SteppedClock;
  log: RunLog;
  /** Moves the emulator's clock forward and lets jobs and due faults catch up. */
  jump: (ms: number) => void;
}

export interface Scenario {
  name: string;
  description: string;
  suite: 'core' | 'resilience';
  /** How many times the command runs, each against a fresh emulator (default 1). */
  runs?: number;
  /** The waits it imposes on a client, in runs of an ordinary scenario (rate-limited: 12 Retry-Afters). */
  waits?: number;
  /** Emulator options of run `index` (consent, faults, timings, variation). */
  options?: (index: number) => Partial<EmulatorOptions>;
  /** Reacts to what the client does while it runs (moves the clock, revokes the grant, ...). */
  arm?: (a: Arming) => void;
  judge: (runs: readonly ScenarioRun[]) => CheckReport[];
}

const MINUTE = 60_000;
/** The access token lasts 15 minutes: 16 make it expire. */
const EXPIRE = 16 * MINUTE;
/** parallel-expiry: how late the API answers, so that calls sent together overlap at the server. */
const IN_FLIGHT_MS = 500;
/** research-polling: polls closer than this to the one before are a hot loop, from this many on. */
const HOT_POLL_MS = 100;
const HOT_POLLS = 3;
/** The calls that charge (spec 1, 7): the lost answer of lost-answer must be one of theirs. */
const CHARGED_CALLS = new Set(['POST /chat/ask', 'POST /research', 'tool ask', 'tool start_research']);

/** A job's status in a poll's answer: the REST body's, or the MCP tool result's structured content. */
const statusOf = (answer: unknown): unknown => {
  const a = answer as { status?: unknown; result?: { structuredContent?: { status?: unknown } } } | undefined;
  return a?.status ?? a?.result?.structuredContent?.status;
};
/**
 * Jobs run quickly unless the scenario is about them: a run's length is the client's own waiting, and every scenario
 * pays it.
 */
const QUICK_JOBS = { researchQueueMs: 100, researchRunMs: 400, trainingStepMs: 100 };
const APPROVE: Partial<EmulatorOptions> = { consent: [{ clientId: null, policy: { decision: 'approve' } }], timings: QUICK_JOBS };

const s = (ms: number) => `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;

function check(id: CheckId, verdict: Verdict, message: string, hint?: string): CheckReport {
  return { id, verdict, rule: CHECKS[id].rule, message, ...(verdict === 'fail' ? { hint: hint ?? CHECKS[id].hint } : {}) };
}
const pass = (id: CheckId, message: string) => check(id, 'pass', message);
const fail = (id: CheckId, message: string, hint?: string) => check(id, 'fail', message, hint);
const unexercised = (id: CheckId, message: string) => check(id, 'not_exercised', message);

const ok = (e: ObservedExchange) => e.status >= 200 && e.status < 300;
const pathOf = (e: ObservedExchange) => e.url.split('?')[0]!;

/** The first call the service answered with success: the moment several scenarios act on. */
function afterFirstCall(log: RunLog, act: (call: Call) => void): void {
  let done = false;
  log.onExchange((exchange) => {
    if (done || !ok(exchange)) return;
    const call = callOf(exchange);
    if (!call) return;
    done = true;
    act(call);
  });
}

/** The grant a call was admitted under. */
const grantOf = (log: RunLog, call: Call) =>
  log.of('request.admitted').find((e) => e.data.arrival === call.exchange.arrival)?.data.grant_id;

/** A finding's message of `code` recorded in this run, for a failed check that says the same (one text, one place). */
const findingMessage = (log: RunLog, code: string) => log.of('finding.recorded').findLast((e) => e.data.code === code)?.data;

// ---- flow ---------------------------------------------------------------------------------------

const flow: Scenario = {
  name: 'flow',
  description:
    'discovery, registration as a public client, PKCE S256 with state and resource, minimal scopes, one code exchange, Bearer tokens',
  suite: 'core',
  options: () => APPROVE,
  judge([run]) {
    const { log, resource } = run!;
    const ex = log.exchanges.slice().sort((a, b) => a.arrival - b.arrival);
    const registrations = ex.filter((e) => e.method === 'POST' && pathOf(e) === '/oauth/register');
    const authorizations = ex.filter((e) => e.method === 'GET' && pathOf(e) === '/oauth/authorize');
    const checks: CheckReport[] = [];

    // Discovery: RFC 9728 before RFC 8414, both before the client registers or authorizes.
    const first = registrations[0] ?? authorizations[0];
    if (!first) checks.push(unexercised('flow.discovery', 'the client neither registered nor asked for authorization'));
    else {
      const prm = ex.find((e) => pathOf(e).startsWith('/.well-known/oauth-protected-resource') && ok(e));
      const asMeta = ex.find(
        (e) =>
          (pathOf(e).startsWith('/.well-known/oauth-authorization-server') || pathOf(e).startsWith('/.well-known/openid-configuration')) &&
          ok(e),
      );
      if (!prm || prm.arrival > first.arrival)
        checks.push(
          fail(
            'flow.discovery',
            `the client ${first === registrations[0] ? 'registered' : 'asked for authorization'} without reading the protected ` +
              `resource metadata of ${resource} first`,
          ),
        );
      else if (!asMeta || asMeta.arrival > first.arrival)
        checks.push(
          fail(
            'flow.discovery',
            'the client read the protected resource metadata, but not the authorization server metadata (RFC 8414) before it went on',
          ),
        );
      else if (asMeta.arrival < prm.arrival)
        checks.push(
          fail(
            'flow.discovery',
            `the client read ${pathOf(asMeta)} before the protected resource metadata: it guessed the authorization server instead of ` +
              `taking it from authorization_servers`,
          ),
        );
      else checks.push(pass('flow.discovery', `${pathOf(prm)}, then ${pathOf(asMeta)}`));
    }

    // Registration as a public client.
    if (registrations.length === 0) checks.push(unexercised('flow.registration', 'the client did not register'));
    else {
      const methods = registrations.map(
        (r) => (r.body as { token_endpoint_auth_method?: unknown } | undefined)?.token_endpoint_auth_method,
      );
      const confidential = methods.find((m) => m !== undefined && m !== 'none');
      const registered = registrations.filter((r) => r.status === 201);
      if (confidential !== undefined)
        checks.push(
          fail(
            'flow.registration',
            `the client registered with token_endpoint_auth_method ${JSON.stringify(confidential)}; a client on a person's machine is public`,
          ),
        );
      else if (registered.length === 0)
        checks.push(fail('flow.registration', `no registration succeeded (answers: ${registrations.map((r) => r.status).join(', ')})`));
      else if (methods.every((m) => m === undefined))
        checks.push(
          fail(
            'flow.registration',
            'the client registered without token_endpoint_auth_method, which then means client_secret_basic (RFC 7591 §2)',
          ),
        );
      else checks.push(pass('flow.registration', `${plural(registrations.length, 'registration')}, token_endpoint_auth_method "none"`));
    }

    // PKCE S256, a fresh state, the resource.
    if (authorizations.length === 0) checks.push(unexercised('flow.pkce-state-resource', 'the client sent no authorization request'));
    else {
      const states = new Set<string>();
      let problem: { text: string; parameter?: MissingParameter } | undefined;
      for (const [i, a] of authorizations.entries()) {
        const q = new URL(a.url, 'http://x').searchParams;
        const nth = authorizations.length > 1 ? ` (authorization request ${i + 1})` : '';
        const challenge = q.get('code_challenge');
        if (!challenge)
          problem = { text: `no code_challenge${nth}: the authorization request does not use PKCE`, parameter: 'code_challenge' };
        else if (q.get('code_challenge_method') !== 'S256')
          problem = {
            text: `code_challenge_method ${JSON.stringify(q.get('code_challenge_method'))}${nth}, not S256`,
            parameter: 'code_challenge_method',
          };
        else if (!/^[A-Za-z0-9._~-]{43,128}$/.test(challenge))
          problem = { text: `a code_challenge of ${challenge.length} characters${nth}; S256 gives 43` };
        else if (!q.get('state')) problem = { text: `no state${nth}`, parameter: 'state' };
        else if (states.has(q.get('state')!))
          problem = { text: `the same state again${nth}: each authorization request needs a fresh one`, parameter: 'state' };
        else if (q.get('resource') !== resource)
          problem = {
            text:
              q.get('resource') === null
                ? `no resource${nth}: the tokens would be identity tokens`
                : `resource=${q.get('resource')}${nth}, not ${resource}`,
            parameter: 'resource',
          };
        if (problem) break;
        states.add(q.get('state')!);
      }
      checks.push(
        problem
          ? fail(
              'flow.pkce-state-resource',
              problem.text,
              problem.parameter ? missingParameterHint(problem.parameter, resource) : undefined,
            )
          : pass(
              'flow.pkce-state-resource',
              `${plural(authorizations.length, 'authorization request')}: S256, fresh state, resource ${resource}`,
            ),
      );
    }

    // Scopes: supported, not retired, and used.
    const requested = [
      ...new Set(authorizations.flatMap((a) => (new URL(a.url, 'http://x').searchParams.get('scope') ?? '').split(' ').filter(Boolean))),
    ];
    const unsupported = requested.filter((sc) => isRetiredScope(sc) || !isSupportedScope(sc));
    const grants = log.of('grant.created');
    const used = new Map<string, Set<string>>();
    for (const e of log.of('request.admitted'))
      (used.get(e.data.grant_id) ?? used.set(e.data.grant_id, new Set()).get(e.data.grant_id)!).add(e.data.scope);
    if (requested.length === 0 && grants.length === 0) checks.push(unexercised('flow.minimal-scopes', 'the client asked for no scope'));
    else if (unsupported.length > 0)
      checks.push(
        fail(
          'flow.minimal-scopes',
          `the client asked for ${unsupported.map((sc) => `“${sc}”`).join(', ')}, which the service does not offer (retired or unknown)`,
        ),
      );
    else if (used.size === 0)
      checks.push(unexercised('flow.minimal-scopes', `asked for ${requested.join(' ')}; no call was made that would use them`));
    else {
      const unused = grants.flatMap((g) =>
        used.has(g.data.grant_id) ? g.data.scopes.filter((sc) => !used.get(g.data.grant_id)!.has(sc)) : [],
      );
      // The finding scope.unused says it (one text, one place); the list is the fallback for a finding since cleared.
      const finding = log.findings.find((f) => f.code === 'scope.unused');
      checks.push(
        unused.length > 0
          ? fail('flow.minimal-scopes', finding?.message ?? `unused scopes: ${[...new Set(unused)].join(', ')}`, finding?.hint)
          : pass('flow.minimal-scopes', `asked for ${requested.join(' ')}, and used each`),
      );
    }

    // The code exchanged once.
    const codes = log.of('code.issued').length;
    const replays = log.of('code.replayed').length;
    const exchanged = log.of('tokens.issued').filter((e) => e.data.grant_type === 'authorization_code').length;
    if (codes === 0) checks.push(unexercised('flow.code-once', 'no authorization code was issued'));
    else if (exchanged === 0 && replays === 0) checks.push(unexercised('flow.code-once', 'the client never exchanged its code'));
    else if (replays > 0)
      checks.push(
        fail(
          'flow.code-once',
          `an authorization code was presented again (${plural(replays, 'time')}): the service revoked what it had issued from it`,
        ),
      );
    else checks.push(pass('flow.code-once', `${plural(codes, 'code')} issued, ${exchanged} exchanged once each`));

    // The access token as a Bearer token.
    const tokensAt = log.of('tokens.issued')[0]?.real;
    const calls = tokensAt === undefined ? [] : log.calls().filter((c) => c.exchange.startedAt >= tokensAt);
    if (calls.length === 0) checks.push(unexercised('flow.bearer', 'the client made no call with a token'));
    else {
      const wrong = calls.filter((c) => !/^bearer +\S/i.test(c.exchange.authorization ?? '') || /[?&]access_token=/.test(c.exchange.url));
      checks.push(
        wrong.length > 0
          ? fail(
              'flow.bearer',
              `${plural(wrong.length, 'call')} of ${calls.length} came without "Authorization: Bearer" (the first: ${wrong[0]!.route})`,
            )
          : pass('flow.bearer', `${plural(calls.length, 'call')}, each with a Bearer token`),
      );
    }
    return checks;
  },
};

// ---- expiry, rotation, parallel expiry ----------------------------------------------------------

/** Refreshes, refusals and family ends after `since` (real time). */
function refreshesSince(log: RunLog, since: number) {
  return {
    rotated: log.of('refresh.rotated').filter((e) => e.real >= since),
    refused: log.of('refresh.refused').filter((e) => e.real >= since),
    invalidated: log.of('family.invalidated').filter((e) => e.real >= since && e.data.reason === 'refresh_replay'),
  };
}

const expiry: Scenario = {
  name: 'expiry',
  description:
    'the access token expires after the first successful call (the clock moves 16 minutes): refresh with rotation, repeat, no new consent',
  suite: 'core',
  options: () => APPROVE,
  arm({ log, jump }) {
    afterFirstCall(log, () => {
      jump(EXPIRE);
      log.mark('expired');
    });
  },
  judge([run]) {
    const { log } = run!;
    const at = log.marks.get('expired');
    const ids = ['expiry.refreshes', 'expiry.repeat-succeeds', 'expiry.no-new-consent'] as const;
    if (at === undefined) return ids.map((id) => unexercised(id, 'the client made no successful call, so its token never expired'));
    const after = log.calls().filter((c) => c.exchange.startedAt >= at);
    if (after.length === 0) return ids.map((id) => unexercised(id, 'the client made no call after its access token expired'));
    const { rotated, refused } = refreshesSince(log, at);
    const checks: CheckReport[] = [];
    const refusedAtResource = log.of('access.refused').filter((e) => e.real >= at && e.data.reason === 'token_expired').length;
    if (rotated.length === 0)
      checks.push(
        fail(
          'expiry.refreshes',
          `${plural(after.length, 'call')} after the expiry (${plural(refusedAtResource, 'refused as expired')}), and no ` +
            `refresh${refused.length ? ` that succeeded (${refused.map((r) => r.data.reason).join(', ')})` : ''}`,
        ),
      );
    else checks.push(pass('expiry.refreshes', `refreshed with rotation ${s(rotated[0]!.real - at)} after the expiry`));
    // The repeat of a call the expiry refused (its route: a refusal comes before the body is read, and an MCP call
    // refused is only `POST /mcp`); any call when none was refused (a refresh ahead of time).
    const refusedAfter = after.filter((c) => c.exchange.status === 401);
    const repeats = (refused: Call, call: Call) =>
      refused.route === 'POST /mcp' ? call.route === 'POST /mcp' || call.route.startsWith('tool ') : refused.route === call.route;
    const repeated =
      rotated[0] &&
      after.find(
        (c) =>
          c.exchange.startedAt >= rotated[0]!.real &&
          ok(c.exchange) &&
          (refusedAfter.length === 0 || refusedAfter.some((r) => repeats(r, c))),
      );
    if (!rotated[0]) checks.push(unexercised('expiry.repeat-succeeds', 'no refresh, so no repeat after one'));
    else
      checks.push(
        repeated
          ? pass('expiry.repeat-succeeds', `${repeated.route} answered ${repeated.exchange.status} with the new token`)
          : fail(
              'expiry.repeat-succeeds',
              refusedAfter.length
                ? `after the refresh the refused ${refusedAfter[0]!.route} was not repeated with success`
                : 'after the refresh no call succeeded',
            ),
      );
    const consents = log.of('consent.shown').filter((e) => e.real >= at).length;
    checks.push(
      consents > 0
        ? fail(
            'expiry.no-new-consent',
            `the person was asked to consent again (${plural(consents, 'time')}) after the access token expired`,
          )
        : pass('expiry.no-new-consent', 'no new consent'),
    );
    return checks;
  },
};

const rotation: Scenario = {
  name: 'rotation',
  description: 'two expiries in one run: the client always presents the newest refresh token; no replay, the family lives',
  suite: 'core',
  options: () => APPROVE,
  arm({ log, jump }) {
    let expiries = 0;
    let rotatedSince = false;
    log.onEvent((e) => {
      if (e.name === 'refresh.rotated') rotatedSince = true;
    });
    log.onExchange((exchange) => {
      if (!ok(exchange) || !callOf(exchange)) return;
      if (expiries === 0 || (expiries === 1 && rotatedSince)) {
        expiries++;
        rotatedSince = false;
        jump(EXPIRE);
        log.mark(`expired.${expiries}`);
      }
    });
  },
  judge([run]) {
    const { log } = run!;
    const at = log.marks.get('expired.1');
    const { rotated, refused, invalidated } = refreshesSince(log, at ?? 0);
    if (at === undefined || (rotated.length === 0 && refused.length === 0))
      return (['rotation.newest-refresh-token', 'rotation.family-lives'] as const).map((id) =>
        unexercised(id, 'the client never refreshed'),
      );
    const replay = refused.find((r) => r.data.reason === 'replay');
    const finding = findingMessage(log, 'refresh.stale_token') ?? findingMessage(log, 'refresh.concurrent');
    // The newest token is only shown to be used by a second refresh, after the second expiry.
    if (!replay && invalidated.length === 0 && rotated.length < 2)
      return (['rotation.newest-refresh-token', 'rotation.family-lives'] as const).map((id) =>
        unexercised(
          id,
          log.marks.has('expired.2')
            ? 'the client did not refresh after the second expiry'
            : 'the client made no call after its first refresh, so its token never expired twice',
        ),
      );
    const expiries = log.marks.has('expired.2') ? 'two expiries' : 'one expiry';
    return [
      replay
        ? fail(
            'rotation.newest-refresh-token',
            finding?.message ?? `a rotated refresh token (generation ${replay.data.generation ?? '?'}) was presented again`,
            finding?.hint,
          )
        : pass(
            'rotation.newest-refresh-token',
            `${plural(rotated.length, 'rotation')} over ${expiries}, each with the newest refresh token`,
          ),
      invalidated.length > 0
        ? fail(
            'rotation.family-lives',
            `the token family was invalidated by a refresh-token replay ${s(invalidated[0]!.real - at)} after the first expiry`,
            finding?.hint,
          )
        : pass('rotation.family-lives', 'the token family lives'),
    ];
  },
};

const parallelExpiry: Scenario = {
  name: 'parallel-expiry',
  description: 'the access token expires while the client has several calls in flight: one refresh, no replay, the family lives',
  suite: 'resilience',
  // The API's answers come half a second late, so calls a client sends together are in flight together at the server.
  // So does a refresh: a client that refreshes on each refusal, rather than once for all, presents the same refresh
  // token again while its first refresh is still in flight, however quickly its refusals come back.
  options: () => ({
    ...APPROVE,
    faults: [
      ...RATE_LIMITED.map((route): FaultSpec => ({ kind: 'latency', route, ms: IN_FLIGHT_MS })),
      { kind: 'latency', tool: '*', ms: IN_FLIGHT_MS },
      { kind: 'latency', route: 'POST /oauth/token', ms: IN_FLIGHT_MS },
    ],
  }),
  arm({ log, jump }) {
    // After a first call succeeded, the token expires the moment a call arrives while another is in flight: that
    // call and those sent with it meet the expiry together.
    let used = false;
    afterFirstCall(log, () => (used = true));
    log.onCallStarted((request, othersInFlight) => {
      if (!used || othersInFlight === 0 || log.marks.has('expired')) return;
      // The expiry is the moment this call arrived: it meets the expiry, so it counts among the calls after it, even
      // when the clock's jump, or a millisecond's tick, comes between its arrival and this mark.
      log.mark('expired', request.startedAt);
      jump(EXPIRE);
    });
  },
  judge([run]) {
    const { log } = run!;
    const at = log.marks.get('expired');
    const ids = ['parallel-expiry.one-refresh', 'parallel-expiry.family-lives'] as const;
    if (at === undefined)
      return ids.map((id) => unexercised(id, 'after its first successful call the client never sent a call while another was in flight'));
    const after = log.calls().filter((c) => c.exchange.startedAt >= at);
    // A refusal is answered in a millisecond, so calls sent together rarely overlap at the server; but a client that
    // sent one call at a time would have refreshed after the first refusal: several refused with one token were sent together.
    const refusedWith = new Map<string, number>();
    for (const c of after)
      if (c.exchange.status === 401 && c.exchange.authorization)
        refusedWith.set(c.exchange.authorization, (refusedWith.get(c.exchange.authorization) ?? 0) + 1);
    const most = Math.max(mostInFlight(after), ...refusedWith.values());
    if (most < 2) return ids.map((id) => unexercised(id, `the client never had two calls in flight after the expiry (at most ${most})`));
    const { rotated, refused, invalidated } = refreshesSince(log, at);
    const concurrent = findingMessage(log, 'refresh.concurrent');
    const replays = refused.filter((r) => r.data.reason === 'replay');
    return [
      replays.length > 0
        ? fail(
            'parallel-expiry.one-refresh',
            `${most} calls were in flight after the access token expired; ${
              concurrent?.message ?? `the refresh token was presented ${replays.length + rotated.length} times`
            }`,
          )
        : pass(
            'parallel-expiry.one-refresh',
            `${most} calls in flight after the expiry, ${plural(rotated.length, 'refresh', 'refreshes')}, no replay`,
          ),
      invalidated.length > 0
        ? fail(
            'parallel-expiry.family-lives',
            `the token family was invalidated (refresh_replay) ${s(invalidated[0]!.real - at)} after the expiry`,
          )
        : pass('parallel-expiry.family-lives', 'the token family lives'),
    ];
  },
};

// ---- the grant ends: revoked, family killed -----------------------------------------------------

function grantEnd(name: 'revoked' | 'family-killed', description: string, arm: Scenario['arm']): Scenario {
  const id = (check: 'no-loop' | 'stops-or-reauthorizes' | 'no-refused-refresh-retry') => `${name}.${check}` as CheckId;
  return {
    name,
    description,
    suite: name === 'revoked' ? 'core' : 'resilience',
    options: () => APPROVE,
    arm,
    judge([run]) {
      const { log, exitCode, timedOut } = run!;
      const at = log.marks.get('ended');
      const grant = log.of('grant.revoked')[0]?.data.grant_id ?? log.of('family.invalidated')[0]?.data.grant_id;
      const all = [id('no-loop'), id('stops-or-reauthorizes'), id('no-refused-refresh-retry')];
      if (at === undefined || grant === undefined)
        return all.map((c) => unexercised(c, 'the grant never ended: the client made no successful call'));
      const refusedCalls = log.of('access.refused').filter((e) => e.real >= at && e.data.grant_id === grant);
      const refusedRefreshes = log.of('refresh.refused').filter((e) => e.real >= at && e.data.grant_id === grant);
      const newConsent = log.of('consent.approved').find((e) => e.real >= at);
      if (refusedCalls.length === 0 && refusedRefreshes.length === 0 && !newConsent)
        return all.map((c) =>
          unexercised(
            c,
            `the client did not use the ${name === 'revoked' ? 'revoked grant' : 'dead family'} again (exit ${exitCode ?? 'none'})`,
          ),
        );
      const checks: CheckReport[] = [];
      const seen = `${plural(refusedCalls.length, 'refused call')} and ${plural(refusedRefreshes.length, 'refused refresh', 'refused refreshes')}`;
      // Calls already in flight when the first refusal came back are one refused call; one sent after it is another.
      const refusedExchanges = log.calls().filter((c) => c.exchange.startedAt >= at && c.exchange.status === 401);
      const learned = Math.min(...refusedExchanges.map((c) => c.exchange.endedAt));
      const sentAfter = refusedExchanges.filter((c) => c.exchange.startedAt > learned).length;
      checks.push(
        sentAfter === 0 && refusedRefreshes.length <= 1
          ? pass(id('no-loop'), `${seen}, then the client stopped using the dead tokens`)
          : fail(
              id('no-loop'),
              `after the ${name === 'revoked' ? 'revocation' : 'family ended'}: ${seen}, ${plural(sentAfter, 'call')} sent after the ` +
                `first refusal had come back (at most one refused call, or the calls in flight with it, and one refresh)`,
            ),
      );
      if (newConsent) checks.push(pass(id('stops-or-reauthorizes'), `a new authorization, approved ${s(newConsent.real - at)} later`));
      else if (timedOut)
        checks.push(fail(id('stops-or-reauthorizes'), 'the client was still running at the timeout, without a new authorization'));
      else if (exitCode !== 0) checks.push(pass(id('stops-or-reauthorizes'), `the client exited ${exitCode}`));
      else checks.push(fail(id('stops-or-reauthorizes'), 'the client exited 0 without a new authorization, as if nothing had happened'));
      const perFamily = new Map<string, number>();
      for (const r of refusedRefreshes) perFamily.set(r.data.family_id, (perFamily.get(r.data.family_id) ?? 0) + 1);
      const again = [...perFamily.values()].find((n) => n > 1);
      checks.push(
        again
          ? fail(
              id('no-refused-refresh-retry'),
              `a refresh token the service refused was presented again (${plural(again, 'time')} in all)`,
            )
          : refusedRefreshes.length === 0
            ? pass(id('no-refused-refresh-retry'), 'no refresh with the dead family')
            : pass(id('no-refused-refresh-retry'), 'the refused refresh token was not sent again'),
      );
      return checks;
    },
  };
}

const revoked = grantEnd(
  'revoked',
  'the person revokes the grant after the first successful call: no loop, exit non-zero or a new approved authorization, no refused refresh again',
  ({ emulator, log }) => {
    afterFirstCall(log, (call) => {
      const grant = grantOf(log, call);
      if (!grant) return;
      emulator.faults.arm({ kind: 'revoke', grant_id: grant });
      log.mark('ended');
      void emulator.faults.runDue();
    });
  },
);

const familyKilled = grantEnd(
  'family-killed',
  "a replay of one of the client's rotated refresh tokens ends the family (refresh_replay fault): checks as for revoked",
  ({ emulator, log, jump }) => {
    let grant: string | undefined;
    afterFirstCall(log, (call) => {
      grant = grantOf(log, call);
      jump(EXPIRE);
    });
    let done = false;
    log.onEvent((e) => {
      if (done || e.name !== 'refresh.rotated' || e.data.grant_id !== grant) return;
      done = true;
      // After the rotation's commit: a replay of the token it rotated.
      setImmediate(() => {
        emulator.faults.arm({ kind: 'refresh_replay', grant_id: e.data.grant_id });
        log.mark('ended');
        void emulator.faults.runDue();
      });
    });
  },
);

// ---- rate limits, server errors, lost answers ---------------------------------------------------

/**
 * Every rate-limited REST route (the allowlist). MCP tool calls all share `POST /mcp`, so faults take them by tool
 * (TOOLS), each on its own as each route is.
 */
const RATE_LIMITED = [
  'POST /chat/ask',
  'POST /research',
  'GET /research/{job_id}',
  'POST /training',
  'GET /training/{document_id}',
  'GET /training/{document_id}/url',
];
const TOOLS = Object.keys(TOOL_SCOPES) as ToolName[];
const RETRY_AFTER = 2;
/**
 * Times are taken in this process as requests arrive and answers go out, so a busy moment here can shorten a gap the
 * client kept by a little: this much is allowed (a client that does not wait misses by a second or more).
 */
const TOLERANCE_MS = 50;

const rateLimited: Scenario = {
  name: 'rate-limited',
  waits: 4,
  description:
    'the first two calls to each allowlist route and to the MCP tools get 429 with Retry-After: 2: wait, at most three calls, then succeed',
  suite: 'resilience',
  options: () => ({
    ...APPROVE,
    faults: [
      ...RATE_LIMITED.map((route): FaultSpec => ({ kind: 'rate_limit', route, count: 2, retry_after: RETRY_AFTER })),
      ...TOOLS.map((tool): FaultSpec => ({ kind: 'rate_limit', tool, count: 2, retry_after: RETRY_AFTER })),
    ],
  }),
  judge([run]) {
    const { log } = run!;
    const calls = log.calls();
    const limited = calls.filter((c) => c.exchange.status === 429);
    const ids = ['rate-limited.waits-retry-after', 'rate-limited.at-most-three-calls', 'rate-limited.eventually-succeeds'] as const;
    if (limited.length === 0) return ids.map((id) => unexercised(id, 'the client called no rate-limited route'));
    const early: string[] = [];
    const many: string[] = [];
    const never: string[] = [];
    for (const route of new Set(limited.map((c) => c.route))) {
      const same = calls.filter((c) => c.route === route);
      for (const c of same.filter((x) => x.exchange.status === 429)) {
        // A call that arrived before the 429 went out was sent before the client could know of it.
        const delivered = c.exchange.sentAt || c.exchange.endedAt;
        const next = same.find((n) => n.exchange.startedAt >= delivered && n !== c);
        const gap = next ? next.exchange.startedAt - delivered : Infinity;
        if (gap < RETRY_AFTER * 1000 - TOLERANCE_MS)
          early.push(`${route}: the next call came ${s(gap)} after a 429 whose Retry-After asked to wait ${RETRY_AFTER} s`);
      }
      const firstLimited = same.findIndex((c) => c.exchange.status === 429);
      const success = same.findIndex((c, i) => i > firstLimited && ok(c.exchange));
      const window = (success === -1 ? same.length : success + 1) - firstLimited;
      if (window > 3) many.push(`${route}: ${window} calls ${success === -1 ? 'and no success' : 'before one succeeded'}`);
      if (success === -1) never.push(route);
    }
    const routes = new Set(limited.map((c) => c.route)).size;
    return [
      early.length
        ? fail(ids[0], early.join('; '))
        : pass(ids[0], `waited at least ${RETRY_AFTER} s after each of ${plural(limited.length, '429')}`),
      many.length
        ? fail(ids[1], many.join('; '))
        : pass(ids[1], `at most three calls per route while limited (${plural(routes, 'route')})`),
      never.length
        ? fail(ids[2], `no call to ${never.join(', ')} succeeded after its 429`)
        : pass(ids[2], `every limited route (${plural(routes, 'route')}) succeeded in the end`),
    ];
  },
};

const FAILING_POSTS = ['POST /chat/ask', 'POST /research', 'POST /training'];
/** Their MCP twins, the tools that take an `idempotency_key`. */
const FAILING_TOOLS: ToolName[] = ['ask', 'start_research', 'add_training_document'];

/** Later calls that repeat `call`: the same route and the same body. */
const retriesOf = (calls: readonly Call[], call: Call) =>
  calls.filter((c) => c.exchange.arrival > call.exchange.arrival && c.route === call.route && c.body === call.body);

const serverError: Scenario = {
  name: 'server-error',
  description:
    'the first POST to each allowlist route and the first call of each of their MCP tools get 503 with Retry-After: a retry only with ' +
    'the same key and body; nothing charged twice',
  suite: 'resilience',
  options: () => ({
    ...APPROVE,
    faults: [
      ...FAILING_POSTS.map((route): FaultSpec => ({ kind: 'server_error', route, status: 503, count: 1 })),
      ...FAILING_TOOLS.map((tool): FaultSpec => ({ kind: 'server_error', tool, status: 503, count: 1 })),
    ],
  }),
  judge([run]) {
    const { log } = run!;
    const calls = log.calls();
    const failed = calls.filter((c) => c.post && c.exchange.status === 503);
    if (failed.length === 0)
      return (['server-error.retry-with-key', 'server-error.no-double-charge'] as const).map((id) =>
        unexercised(id, 'the client sent no POST to an allowlist route'),
      );
    const wrong: string[] = [];
    let retried = 0;
    for (const f of failed) {
      for (const r of retriesOf(calls, f)) {
        retried++;
        if (f.key === undefined || r.key !== f.key)
          wrong.push(
            `${f.route} answered 503 and was sent ` +
              `again ${s(r.exchange.startedAt - f.exchange.endedAt)}` +
              ` later ${
                r.key === undefined
                  ? `without ${idempotencyKeyName(f.route)}`
                  : f.key === undefined
                    ? 'with a key the first send did not carry'
                    : 'with another key'
              }`,
          );
      }
    }
    const unkeyed = findingMessage(log, 'idempotency.retry_without_key');
    const charges = log.of('charge.recorded');
    const byBody = new Map<string, typeof charges>();
    for (const c of charges)
      if (c.data.body_sha256)
        byBody.set(`${c.data.route}\n${c.data.body_sha256}`, [...(byBody.get(`${c.data.route}\n${c.data.body_sha256}`) ?? []), c]);
    const doubled = [...byBody.values()].find((g) => g.length > 1);
    return [
      wrong.length
        ? fail('server-error.retry-with-key', wrong.join('; '))
        : pass(
            'server-error.retry-with-key',
            retried
              ? `${plural(retried, 'retry', 'retries')}, each with the first send's key and body`
              : `${plural(failed.length, '503')}, not retried`,
          ),
      unkeyed || doubled
        ? fail(
            'server-error.no-double-charge',
            unkeyed?.message ?? `${doubled![0]!.data.route} charged ${doubled!.length} times for the same body`,
          )
        : pass('server-error.no-double-charge', `${plural(charges.length, 'charge')}, none twice`),
    ];
  },
};

const lostAnswer: Scenario = {
  name: 'lost-answer',
  description:
    'the first charged call is carried out and committed, then its connection closes before the answer: retry with the same key (one ' +
    'charge) or report the failure',
  suite: 'resilience',
  options: () => APPROVE,
  arm({ emulator }) {
    emulator.faults.arm({ kind: 'drop_response', count: 1 });
  },
  judge([run]) {
    const { log, exitCode } = run!;
    const ids = ['lost-answer.retry-same-key', 'lost-answer.one-charge'] as const;
    const fired = log.of('fault.fired').find((e) => e.data.kind === 'drop_response');
    if (!fired) return ids.map((id) => unexercised(id, 'the client made no charged call'));
    const calls = log.calls();
    const dropped = calls.find((c) => c.post && c.exchange.status === 0);
    if (!dropped)
      return ids.map((id) =>
        unexercised(id, `the answer to ${fired.data.method ?? ''} ${fired.data.path ?? ''} was dropped, but the call was not seen`),
      );
    // The fault takes the first call that has a key to send, charged or not (a training upload): only a charged one tests this.
    if (!CHARGED_CALLS.has(dropped.route))
      return ids.map((id) => unexercised(id, `the lost answer was of ${dropped.route}, which charges nothing`));
    const retries = retriesOf(calls, dropped);
    const checks: CheckReport[] = [];
    if (retries.length === 0)
      checks.push(
        exitCode !== 0 && exitCode !== null
          ? pass(ids[0], `not retried; the client reported the failure (exit ${exitCode})`)
          : fail(
              ids[0],
              `the answer to ${dropped.route} was lost; the client neither retried it nor failed (exit ${exitCode ?? 'none: killed at the timeout'})`,
            ),
      );
    else {
      const bad = retries.find((r) => dropped.key === undefined || r.key !== dropped.key);
      checks.push(
        bad
          ? fail(
              ids[0],
              `${dropped.route} was retried ${
                bad.key === undefined
                  ? 'without a key'
                  : dropped.key === undefined
                    ? 'with a key the lost call did not carry'
                    : 'with another key'
              } after its answer was lost: it ran twice`,
            )
          : pass(ids[0], `${plural(retries.length, 'retry', 'retries')} with the lost call's key`),
      );
    }
    const hash = sha256(dropped.body);
    const charges = log
      .of('charge.recorded')
      .filter(
        (c) =>
          c.data.route === dropped.route &&
          (dropped.key !== undefined ? c.data.idempotency_key === dropped.key || c.data.body_sha256 === hash : c.data.body_sha256 === hash),
      );
    checks.push(
      charges.length <= 1
        ? pass(ids[1], `${plural(charges.length, 'charge')} for ${dropped.route}`)
        : fail(ids[1], `${dropped.route} was charged ${charges.length} times for one operation`),
    );
    return checks;
  },
};

// ---- research and training ----------------------------------------------------------------------

/** A seed whose first research job shows a running status the spec does not list. */
const UNLISTED_SEED = (() => {
  for (let seed = 1; ; seed++) {
    const status = selectVariant(seed, 'research', 0).choices['status.running'];
    if (status !== 'running' && status !== 'queued') return seed;
  }
})();
/** The emulator time a poll moves the clock on: the job runs three minutes, over a few polls. */
const POLL_STEP = 40_000;

const isPollOf = (c: Call, job: string) => c.id === job && (c.route === 'GET /research/{job_id}' || c.route === 'tool get_research');

const researchPolling: Scenario = {
  name: 'research-polling',
  description:
    'the research job runs three minutes on the emulator clock, and its running status is one the spec does not list: polls 1 s apart, stop at succeeded, free',
  suite: 'resilience',
  options: () => ({ ...APPROVE, varyUnspecified: { seed: UNLISTED_SEED }, timings: { ...QUICK_JOBS, researchRunMs: 3 * MINUTE } }),
  arm({ log, jump }) {
    log.onExchange((exchange) => {
      const call = callOf(exchange);
      if (call && ok(exchange) && call.id && !call.post && !call.route.includes('training')) jump(POLL_STEP);
    });
  },
  judge([run]) {
    const { log } = run!;
    const ids = [
      'research-polling.interval',
      'research-polling.stops-at-succeeded',
      'research-polling.free',
      'research-polling.unknown-status',
    ] as const;
    const created = log.of('research.created')[0];
    if (!created) return ids.map((id) => unexercised(id, 'the client started no research'));
    const job = created.data.job_id;
    const calls = log.calls();
    const polls = calls.filter((c) => isPollOf(c, job));
    const checks: CheckReport[] = [];
    if (polls.length < 2) checks.push(unexercised(ids[0], `${plural(polls.length, 'poll')} of ${job}`));
    else {
      const span = polls.at(-1)!.exchange.startedAt - polls[0]!.exchange.startedAt;
      const every = span / (polls.length - 1);
      // A burst of polls that a long pause then averages out is a hot loop all the same.
      const hot = polls.slice(1).filter((p, i) => p.exchange.startedAt - polls[i]!.exchange.startedAt < HOT_POLL_MS).length;
      checks.push(
        every < 1000 - TOLERANCE_MS
          ? fail(ids[0], `${polls.length} polls in ${s(span)}: one every ${Math.round(every)} ms`)
          : hot >= HOT_POLLS
            ? fail(
                ids[0],
                `${plural(hot, 'poll')} came less than ${HOT_POLL_MS} ms after the one before (a hot loop), ` +
                  `though ${polls.length} polls averaged one every ${s(every)}`,
              )
            : pass(ids[0], `${polls.length} polls in ${s(span)}: one every ${s(every)}`),
      );
    }
    const succeeded = log.of('research.succeeded').find((e) => e.data.job_id === job);
    if (!succeeded) checks.push(unexercised(ids[1], 'the job did not succeed while the client ran'));
    else {
      const after = polls.filter((p) => p.exchange.startedAt >= succeeded.real && ok(p.exchange));
      checks.push(
        after.length === 0
          ? fail(ids[1], 'the job succeeded, and the client never read it')
          : after.length > 1
            ? fail(ids[1], `the client polled ${plural(after.length - 1, 'more time')} after reading status succeeded`)
            : pass(ids[1], 'one poll read succeeded, with report and citations, then polling stopped'),
      );
    }
    const started = calls.filter((c) => c.post && (c.route === 'POST /research' || c.route === 'tool start_research'));
    const again = started.filter((c, i) => i > 0 && c.body === started[0]!.body);
    const pollCharges = log.of('charge.recorded').filter((c) => c.data.route.startsWith('GET ') || c.data.route === 'tool get_research');
    checks.push(
      polls.length === 0 && again.length === 0
        ? unexercised(ids[2], 'the client never polled')
        : again.length || pollCharges.length
          ? fail(
              ids[2],
              `the same research was started ${plural(again.length, 'more time')} while it ` +
                `ran${pollCharges.length ? `; ${plural(pollCharges.length, 'charged poll')}` : ''}`,
            )
          : pass(ids[2], `${plural(polls.length, 'poll')}, none charged`),
    );
    const unlisted = selectVariant(UNLISTED_SEED, 'research', 0).choices['status.running'];
    const sawUnlisted = polls.filter((p) => statusOf(RunLog.answer(p.exchange)) === unlisted);
    if (sawUnlisted.length === 0) checks.push(unexercised(ids[3], `no poll was answered with status "${unlisted}"`));
    else {
      const last = sawUnlisted.at(-1)!;
      const went = polls.some((p) => p.exchange.arrival > last.exchange.arrival);
      checks.push(
        went
          ? pass(ids[3], `status "${unlisted}" (${plural(sawUnlisted.length, 'poll')}) did not end the run`)
          : fail(ids[3], `the client stopped polling after status "${unlisted}", which the spec does not list`),
      );
    }
    return checks;
  },
};

const TRAINING_STEP = 30_000;

const researchFailed: Scenario = {
  name: 'research-failed',
  description:
    'the research job fails (research_fail fault): polling stops within two polls, and the same research is not started again without a key',
  suite: 'resilience',
  options: () => ({ ...APPROVE, faults: [{ kind: 'research_fail', count: 1 }] }),
  judge([run]) {
    const { log } = run!;
    const ids = ['research-failed.stops-polling', 'research-failed.no-unkeyed-restart'] as const;
    const failed = log.of('research.failed')[0];
    if (!failed) return ids.map((id) => unexercised(id, 'no research job of the client failed'));
    const calls = log.calls();
    const job = failed.data.job_id;
    const later = calls.filter((c) => isPollOf(c, job) && c.exchange.startedAt >= failed.real);
    const started = calls.filter((c) => c.post && (c.route === 'POST /research' || c.route === 'tool start_research'));
    const origin = started[0];
    const restarts = origin
      ? started.filter((c) => c !== origin && c.body === origin.body && c.key === undefined && c.exchange.startedAt >= failed.real)
      : [];
    return [
      later.length <= 2
        ? pass(ids[0], `${plural(later.length, 'poll')} after the job failed`)
        : fail(ids[0], `${later.length} polls after the job failed`),
      restarts.length
        ? fail(ids[1], `the same research was started again without Idempotency-Key (${plural(restarts.length, 'time')}), each one charged`)
        : pass(ids[1], 'not started again without a key'),
    ];
  },
};

const trainingAsync: Scenario = {
  name: 'training-async',
  description: 'for clients that train: the client waits for processing_step to reach its last step before it asks about the document',
  suite: 'resilience',
  // Each step takes half a minute on the emulator clock, and each answered look at the document moves the clock on
  // by one: a client that waits gets there in a few polls, one that does not asks long before.
  options: () => ({ ...APPROVE, timings: { ...QUICK_JOBS, trainingStepMs: TRAINING_STEP } }),
  arm({ log, jump }) {
    log.onExchange((exchange) => {
      const call = callOf(exchange);
      if (call && ok(exchange) && call.id && !call.post && call.route.includes('training')) jump(TRAINING_STEP);
    });
  },
  judge([run]) {
    const { log } = run!;
    const received = log.of('training.received')[0];
    if (!received) return [unexercised('training-async.waits-for-indexed', 'the client trained no document')];
    const indexed = log
      .of('training.step')
      .find((e) => e.data.document_id === received.data.document_id && e.data.processing_step === 'indexed');
    const asks = log
      .calls()
      .filter((c) => (c.route === 'POST /chat/ask' || c.route === 'tool ask') && c.exchange.startedAt >= received.real);
    if (asks.length === 0) return [unexercised('training-async.waits-for-indexed', 'the client asked nothing after training')];
    const early = asks.filter((c) => !indexed || c.exchange.startedAt < indexed.real);
    return [
      early.length
        ? fail(
            'training-async.waits-for-indexed',
            `asked ${s(early[0]!.exchange.startedAt - received.real)} after POST ` +
              `/training, ${
                indexed
                  ? `${s(indexed.real - early[0]!.exchange.startedAt)} before the document was indexed`
                  : 'and the document was never indexed'
              }`,
          )
        : pass(
            'training-async.waits-for-indexed',
            `asked ${s(asks[0]!.exchange.startedAt - indexed!.real)} after the document was indexed`,
          ),
    ];
  },
};

// ---- shapes, consent denied ---------------------------------------------------------------------

/** Runs of `shapes`: enough for the longest list of variants (five) to come round on the first objects. */
export const SHAPE_RUNS = 5;
/**
 * The first seed: over seeds 5021 to 5025 every variant of every dimension comes up on the first object of its kind
 * (the first answer, job and document of each run), so a client that makes one of each meets them all
 * (test/unit/conformance-report.test.ts checks it).
 */
export const SHAPES_SEED = 5021;

const shapes: Scenario = {
  name: 'shapes',
  description:
    `the command runs ${SHAPE_RUNS} times under --vary-unspecified with consecutive seeds: every run exits 0 and makes the ` +
    `same kinds of calls as the first`,
  suite: 'resilience',
  runs: SHAPE_RUNS,
  options: (i) => ({ ...APPROVE, varyUnspecified: { seed: SHAPES_SEED + i } }),
  judge(runs) {
    const bad = runs.filter((r) => r.exitCode !== 0);
    const kinds = (r: ScenarioRun) => new Set(r.log.calls().map((c) => c.route));
    const first = kinds(runs[0]!);
    const differ: string[] = [];
    for (const [i, r] of runs.entries()) {
      if (i === 0) continue;
      const k = kinds(r);
      const missing = [...first].filter((x) => !k.has(x));
      const extra = [...k].filter((x) => !first.has(x));
      if (missing.length || extra.length)
        differ.push(
          `run ${i + 1} (seed ${r.seed}): ${[
            missing.length ? `no ${missing.join(', ')}` : '',
            extra.length ? `also ${extra.join(', ')}` : '',
          ]
            .filter(Boolean)
            .join('; ')}`,
        );
    }
    // A client that never got an answer through (its login failed: see flow) met no varied shape, whatever its exit.
    const answered = runs.some((r) => r.log.calls().some((c) => ok(c.exchange)));
    return [
      !answered
        ? unexercised('shapes.exits-0', 'no run got an answer from the API, so no varied shape was met')
        : bad.length
          ? fail(
              'shapes.exits-0',
              bad.map((r) => `the run with seed ${r.seed} ${r.timedOut ? 'timed out' : `exited ${r.exitCode}`}`).join('; '),
            )
          : pass('shapes.exits-0', `${runs.length} runs (seeds ${runs[0]!.seed}–${runs.at(-1)!.seed}) exited 0`),
      first.size === 0
        ? unexercised('shapes.same-calls', 'the first run made no call')
        : differ.length
          ? fail('shapes.same-calls', differ.join('; '))
          : pass('shapes.same-calls', `every run made the same kinds of calls (${[...first].join(', ')})`),
    ];
  },
};

const consentDenied: Scenario = {
  name: 'consent-denied',
  description:
    'the person answers "Ablehnen": the client exits non-zero after at most two authorization attempts, and does not call the API without a token in a loop',
  suite: 'resilience',
  options: () => ({ consent: [{ clientId: null, policy: { decision: 'deny' } }], timings: QUICK_JOBS }),
  judge([run]) {
    const { log, exitCode, timedOut } = run!;
    const ids = ['consent-denied.exits-non-zero', 'consent-denied.no-tokenless-loop'] as const;
    const denied = log.of('consent.denied');
    if (denied.length === 0) return ids.map((id) => unexercised(id, 'the client never asked for consent'));
    const attempts = log.exchanges.filter((e) => e.method === 'GET' && pathOf(e) === '/oauth/authorize').length;
    const tokenless = log.resourceExchanges().filter((e) => e.startedAt >= denied[0]!.real && !e.authorization).length;
    return [
      timedOut
        ? fail(ids[0], `the client was still running at the timeout after ${plural(attempts, 'authorization attempt')}`)
        : exitCode === 0
          ? fail(ids[0], 'the client exited 0 after the person refused access')
          : attempts > 2
            ? fail(ids[0], `${attempts} authorization attempts before it stopped (two at most)`)
            : pass(ids[0], `exited ${exitCode} after ${plural(attempts, 'authorization attempt')}`),
      tokenless > 2
        ? fail(ids[1], `${tokenless} calls without a token after the refusal`)
        : pass(ids[1], `${plural(tokenless, 'call')} without a token after the refusal`),
    ];
  },
};

/** Every scenario, in the order they run. */
export const SCENARIOS: readonly Scenario[] = [
  flow,
  expiry,
  rotation,
  revoked,
  parallelExpiry,
  familyKilled,
  rateLimited,
  serverError,
  lostAnswer,
  researchPolling,
  researchFailed,
  trainingAsync,
  shapes,
  consentDenied,
];

export const SUITES = {
  all: SCENARIOS.map((sc) => sc.name),
  core: SCENARIOS.filter((sc) => sc.suite === 'core').map((sc) => sc.name),
  resilience: SCENARIOS.filter((sc) => sc.suite === 'resilience').map((sc) => sc.name),
} as const;
export type SuiteName = keyof typeof SUITES;
