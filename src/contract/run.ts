import { randomBytes, randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type * as oauth from 'oauth4webapi';
import { bearerChallenge, retryAfterMs } from '../client/http.js';
import { tokenClaims } from '../client/login-view.js';
import { authorize, login as storedLogin, type Authorized, type LoginOptions } from '../client/login.js';
import { LoginRequiredError, type Session } from '../client/session.js';
import type { StoredLogin } from '../client/token-store.js';
import { summarizeChecks, scenarioVerdict, type CheckReport, type ConformanceReport, type ScenarioReport } from '../conformance/report.js';
import type { ObservedResponse } from '../core/emulation/variant-profile.js';
import { addAmount, DEFAULT_PRICES } from '../protocol/charges.js';
import { ClientError } from '../protocol/errors.js';
import { RETIRED_SCOPES, SUPPORTED_SCOPES } from '../protocol/scopes.js';
import { GROUPS, NEED_FLAG, SERVER_CHECKS, type Need, type ServerCheckId } from './checks.js';

export interface ServerRunOptions {
  allowCharges: boolean;
  allowWrites: boolean;
  allowExtraLogins: boolean;
  /** How `login` reaches the consent screen when the run needs one. */
  browser: LoginOptions['browser'];
  loginTimeoutMs: number;
  /** How long a research job may take to succeed (spec 8: one to several minutes). */
  researchTimeoutMs: number;
  /** A line on stderr: progress, and why an extra consent screen opens. */
  say(line: string): void;
  onCheck?(check: CheckReport): void;
}

export interface ServerRun {
  report: ConformanceReport;
  responses: ObservedResponse[];
}

/** A failed expectation: what was wrong, and the exchange that showed it. */
class Failure extends Error {
  constructor(
    message: string,
    readonly exchange?: Exchange,
  ) {
    super(message);
  }
}

interface Exchange {
  sent: string;
  status: number;
  headers: Headers;
  text: string;
  body: unknown;
}

const received = (x: Exchange): string => {
  const keep = ['content-type', 'location', 'www-authenticate', 'ratelimit-limit', 'retry-after'];
  const headers = keep.flatMap((h) => (x.headers.get(h) ? [`${h}: ${x.headers.get(h)}`] : []));
  return `${x.status}${headers.length ? ` (${headers.join('; ')})` : ''} ${x.text.slice(0, 400)}`.trim();
};

const rand = (bytes = 12) => randomBytes(bytes).toString('base64url');
/** A PKCE verifier that is well-formed (43 characters) and belongs to no challenge the server saw. */
const strayVerifier = () => rand(32);
const asRecord = (v: unknown): Record<string, unknown> =>
  v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};

/** The shape of a value where the spec says "not shown": its type, and an object's field names. */
export function shapeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'object') return `object{${Object.keys(value).sort().join(',')}}`;
  return typeof value;
}

/** How an error answer is written (spec 7: "Error body format: not shown"). */
function errorFormat(x: Exchange): { status: number; format: string; error?: string } {
  const type = x.headers.get('content-type') ?? '';
  const b = asRecord(x.body);
  const format = /problem\+json/.test(type)
    ? 'application/problem+json'
    : typeof b.error === 'string'
      ? 'json {error, error_description}'
      : /json/.test(type)
        ? `json ${shapeOf(x.body)}`
        : type.split(';')[0] || 'no body';
  const error = typeof b.error === 'string' ? b.error : typeof b.type === 'string' ? b.type : undefined;
  return { status: x.status, format, ...(error ? { error } : {}) };
}

const CHARGED_ROUTES = ['POST /chat/ask', 'POST /research'] as const;

/**
 * `agent-access conformance server`: the contract checked against the server `session` points at, through the wire
 * alone. By default it spends nothing and adds nothing: checks that would are skipped and say which flag they need.
 */
export async function runServerConformance(session: Session, options: ServerRunOptions): Promise<ServerRun> {
  const base = session.baseUrl;
  const resourceId = `${base}/mcp`;
  const results = new Map<ServerCheckId, CheckReport>();
  const responses: ObservedResponse[] = [];
  const errors: Record<string, ReturnType<typeof errorFormat>> = {};
  const rateLimit: { limit: string | null; missing: string[]; seen: number } = { limit: null, missing: [], seen: 0 };
  const charged: Record<string, number> = { 'POST /chat/ask': 0, 'POST /research': 0 };

  const record = (id: ServerCheckId, report: Omit<CheckReport, 'id' | 'rule'>) => {
    const prior = results.get(id);
    if (prior?.verdict === 'fail') return; // the first failure stands
    if (prior?.verdict === 'pass' && report.verdict === 'pass') return;
    const check: CheckReport = { id, rule: SERVER_CHECKS[id].rule, ...report };
    results.set(id, check);
  };
  const pass = (id: ServerCheckId, message = 'as the rule says') => record(id, { verdict: 'pass', message });
  const fail = (id: ServerCheckId, message: string, x?: Exchange) =>
    record(id, { verdict: 'fail', message, ...(x ? { sent: x.sent, received: received(x) } : {}) });
  const skip = (id: ServerCheckId, why: string) => record(id, { verdict: 'skipped', message: why });
  const allowed = (need: Need) =>
    need === 'charges' ? options.allowCharges : need === 'writes' ? options.allowWrites : options.allowExtraLogins;

  /** Runs one check's body: a Failure is the check's verdict; a server that cannot be reached ends the run. */
  const emitted = new Set<string>();
  const emit = (id: ServerCheckId) => {
    const check = results.get(id);
    if (check && !emitted.has(id)) {
      emitted.add(id);
      options.onCheck?.(check);
    }
  };
  async function judge(id: ServerCheckId, body: () => Promise<void>): Promise<void> {
    const need = (SERVER_CHECKS[id] as { needs?: Need }).needs;
    if (need && !allowed(need)) {
      skip(id, `skipped (needs ${NEED_FLAG[need]})`);
      return emit(id);
    }
    try {
      await body();
      if (!results.has(id)) pass(id);
    } catch (e) {
      if (e instanceof ClientError && e.kind === 'unreachable') throw e;
      if (e instanceof ClientError && e.kind === 'interrupted') throw e;
      // A person who declines a consent screen says nothing about the server.
      if (e instanceof ClientError && e.kind === 'denied') skip(id, `skipped (its consent screen was not approved: ${e.message})`);
      else fail(id, (e as Error).message, e instanceof Failure ? e.exchange : undefined);
    }
    emit(id);
  }

  /** One request on the session's connection pool; redirects are not followed (they are what some checks look at). */
  async function wire(
    method: string,
    url: string,
    init: { token?: string; json?: unknown; form?: Record<string, string>; key?: string; accept?: string } = {},
  ): Promise<Exchange> {
    const headers: Record<string, string> = { accept: init.accept ?? 'application/json' };
    let body: string | undefined;
    if (init.token) headers.authorization = `Bearer ${init.token}`;
    if (init.key) headers['idempotency-key'] = init.key;
    if (init.json !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(init.json);
    } else if (init.form) {
      headers['content-type'] = 'application/x-www-form-urlencoded';
      body = new URLSearchParams(init.form).toString();
    }
    let res: Response;
    // A 429 is waited out (its Retry-After, a minute at most, three times) where sending again is safe: a GET, or a
    // POST with its Idempotency-Key. The rate limit is the server's right, not a broken rule.
    for (let attempt = 1; ; attempt++) {
      try {
        res = await session.http.fetch(url, { method, headers, body, redirect: 'manual' });
      } catch (e) {
        const code = (e as { cause?: { code?: string } }).cause?.code;
        throw new ClientError('unreachable', `cannot reach ${new URL(url).origin}: ${code ?? (e as Error).message}`);
      }
      const wait = res.status === 429 ? retryAfterMs(res.headers.get('retry-after') ?? undefined, Date.now()) : null;
      if (wait === null || wait > 60_000 || attempt > 3 || (method !== 'GET' && !init.key)) break;
      await res.body?.cancel();
      options.say(
        `agent-access: ${method} ${new URL(url).pathname} answered 429; waiting ${Math.ceil(wait / 1000)} s as its Retry-After says`,
      );
      await sleep(wait);
    }
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // not JSON: keep the text
    }
    const shown = init.form
      ? new URLSearchParams(
          Object.entries(init.form).map(([k, v]): [string, string] => [k, /token|code|verifier/.test(k) ? `${v.slice(0, 6)}…` : v]),
        )
      : undefined;
    const sent = `${method} ${url}${init.key ? ` (Idempotency-Key ${init.key})` : ''}${
      init.token ? ' (with a bearer token)' : ''
    }${init.json !== undefined ? ` ${body}` : shown ? ` ${shown.toString()}` : ''}`;
    const x: Exchange = { sent, status: res.status, headers: res.headers, text, body: parsed };
    const path = new URL(url).pathname;
    // Spec 8: the rate-limit headers on the answers of requests the limit counted (a token that passed the guard).
    if (init.token && ![401, 403].includes(res.status) && (path === '/mcp' || /\/(chat\/ask|research|training)(\/|$)/.test(path))) {
      rateLimit.seen++;
      const missing = ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset'].filter((h) => !res.headers.get(h));
      if (missing.length) rateLimit.missing.push(`${method} ${path} (${res.status}) lacks ${missing.join(', ')}`);
      rateLimit.limit ??= res.headers.get('ratelimit-limit');
    }
    return x;
  }

  const expect = (ok: boolean, message: string, x?: Exchange) => {
    if (!ok) throw new Failure(message, x);
  };

  /** Is this access token accepted? Asked at /mcp with an `initialize`, which is free and changes nothing. */
  const mcpProbe = (token: string) =>
    wire('POST', resourceId, {
      token,
      accept: 'application/json, text/event-stream',
      json: {
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'agent-access conformance server', version: '1' } },
      },
    });
  const refused = (x: Exchange) => x.status === 401 || x.status === 403;

  /** Spec 2.2 on a token answer of the run. */
  function tokenResponse(tokens: Record<string, unknown>, where: string, x?: Exchange) {
    const problems = [];
    if (typeof tokens.token_type !== 'string' || tokens.token_type.toLowerCase() !== 'bearer')
      problems.push(`token_type is ${JSON.stringify(tokens.token_type)}, not "Bearer"`);
    if (tokens.expires_in !== 900) problems.push(`expires_in is ${JSON.stringify(tokens.expires_in)}, not 900`);
    if (typeof tokens.scope !== 'string') problems.push('scope is missing');
    if (problems.length) fail('token.response', `${where}: ${problems.join('; ')}`, x);
    else pass('token.response', 'every token answer: token_type Bearer, expires_in 900, scope');
  }

  // ---- discovery ----
  const resourceUrl = new URL(resourceId);
  let issuer: string | undefined;
  let meta: Record<string, unknown> = {};
  await judge('discovery.resource-metadata', async () => {
    const x = await wire('GET', `${resourceUrl.origin}/.well-known/oauth-protected-resource${resourceUrl.pathname}`);
    expect(x.status === 200, `answered ${x.status}, not 200`, x);
    const b = asRecord(x.body);
    expect(b.resource === resourceId, `resource is ${JSON.stringify(b.resource)}, not "${resourceId}"`, x);
    const servers = b.authorization_servers;
    expect(Array.isArray(servers) && typeof servers[0] === 'string', 'authorization_servers names no authorization server', x);
    issuer = (servers as string[])[0];
    const scopes = Array.isArray(b.scopes_supported) ? (b.scopes_supported as unknown[]) : [];
    const lacking = SUPPORTED_SCOPES.filter((s) => !scopes.includes(s));
    const retired = RETIRED_SCOPES.filter((s) => scopes.includes(s));
    expect(lacking.length === 0, `scopes_supported lacks ${lacking.join(', ')}`, x);
    expect(retired.length === 0, `scopes_supported names the retired scope(s) ${retired.join(', ')}`, x);
  });
  await judge('discovery.as-metadata', async () => {
    const named = new URL(issuer ?? base);
    const path = named.pathname.replace(/\/$/, '');
    const x = await wire('GET', `${named.origin}/.well-known/oauth-authorization-server${path}`);
    expect(x.status === 200, `answered ${x.status}, not 200`, x);
    meta = asRecord(x.body);
    const problems = [];
    if (meta.issuer !== (issuer ?? base)) problems.push(`issuer is ${JSON.stringify(meta.issuer)}, not "${issuer ?? base}" byte for byte`);
    for (const e of ['authorization_endpoint', 'token_endpoint', 'registration_endpoint'])
      if (typeof meta[e] !== 'string') problems.push(`${e} is missing`);
    const has = (field: string, value: string) => Array.isArray(meta[field]) && (meta[field] as unknown[]).includes(value);
    if (!has('code_challenge_methods_supported', 'S256')) problems.push('code_challenge_methods_supported lacks S256');
    const auth = meta.token_endpoint_auth_methods_supported;
    if (!(Array.isArray(auth) && auth.length === 1 && auth[0] === 'none'))
      problems.push(`token_endpoint_auth_methods_supported is ${JSON.stringify(auth)}, not ["none"]`);
    for (const g of ['authorization_code', 'refresh_token'])
      if (!has('grant_types_supported', g)) problems.push(`grant_types_supported lacks ${g}`);
    if (!has('response_types_supported', 'code')) problems.push('response_types_supported lacks code');
    expect(problems.length === 0, problems.join('; '), x);
  });
  const endpoint = (name: string) => {
    const url = meta[name];
    if (typeof url !== 'string') throw new Failure(`needs the ${name} of the authorization server metadata, which discovery did not give`);
    return url;
  };

  // ---- registration ----
  let clientId: string | undefined;
  const registeredRedirect = 'http://127.0.0.1/callback';
  const registration = (redirect: string) => ({
    client_name: 'agent-access conformance server',
    redirect_uris: [redirect],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
    application_type: 'native',
  });
  await judge('registration.public-client', async () => {
    const x = await wire('POST', endpoint('registration_endpoint'), { json: registration(registeredRedirect) });
    expect(x.status === 201, `answered ${x.status}, not 201`, x);
    const b = asRecord(x.body);
    expect(typeof b.client_id === 'string' && b.client_id !== '', 'no client_id', x);
    clientId = b.client_id as string;
    expect(b.client_secret === undefined, 'a public client was given a client_secret', x);
  });
  await judge('registration.bad-redirect-uri', async () => {
    const x = await wire('POST', endpoint('registration_endpoint'), { json: registration(`${registeredRedirect}#fragment`) });
    errors['registration.bad-redirect-uri'] = errorFormat(x);
    expect(x.status === 400, `a redirect URI with a fragment answered ${x.status}, not 400`, x);
    expect(
      asRecord(x.body).error === 'invalid_redirect_uri',
      `error is ${JSON.stringify(asRecord(x.body).error)}, not "invalid_redirect_uri"`,
      x,
    );
  });

  // ---- authorization requests refused before any consent ----
  // A port nothing listens on: the redirect is read, never followed.
  const redirectUri = 'http://127.0.0.1:49999/callback';
  async function authorizeRequest(change: (p: URLSearchParams) => void): Promise<Exchange> {
    if (!clientId) throw new Failure('needs the client that registration.public-client registers');
    const url = new URL(endpoint('authorization_endpoint'));
    const p = url.searchParams;
    p.set('response_type', 'code');
    p.set('client_id', clientId);
    p.set('redirect_uri', redirectUri);
    p.set('scope', 'ask');
    p.set('state', rand());
    p.set('code_challenge', rand(32));
    p.set('code_challenge_method', 'S256');
    p.set('resource', resourceId);
    change(p);
    return wire('GET', url.href, { accept: 'text/html' });
  }
  /** RFC 6749 §4.1.2.1: with a valid client and redirect URI the error goes back by redirect; never a consent, never a code. */
  async function refusedByRedirect(id: ServerCheckId, expected: string, change: (p: URLSearchParams) => void) {
    await judge(id, async () => {
      const x = await authorizeRequest(change);
      const location = x.headers.get('location');
      expect(x.status !== 200, 'the server showed the consent screen instead of refusing', x);
      expect(
        x.status >= 300 && x.status < 400 && location !== null,
        `answered ${x.status} directly; the error belongs in a redirect to the client`,
        x,
      );
      const to = new URL(location!, x.sent.split(' ')[1]);
      expect(to.searchParams.get('code') === null, 'the server accepted the request and issued a code', x);
      errors[id] = {
        status: x.status,
        format: 'redirect',
        ...(to.searchParams.get('error') ? { error: to.searchParams.get('error')! } : {}),
      };
      expect(
        `${to.origin}${to.pathname}` === redirectUri,
        `redirected to ${to.origin}${to.pathname}, not to the client's ${redirectUri}`,
        x,
      );
      expect(to.searchParams.get('error') === expected, `the redirect carries error=${to.searchParams.get('error')}, not ${expected}`, x);
    });
  }
  /** OAuth 2.1 §4.1.2.1: an unknown client or redirect URI is answered directly, never redirected. */
  async function refusedDirectly(id: ServerCheckId, change: (p: URLSearchParams) => void) {
    await judge(id, async () => {
      const x = await authorizeRequest(change);
      errors[id] = errorFormat(x);
      expect(x.status !== 200, 'the server showed the consent screen instead of refusing', x);
      expect(!x.headers.get('location'), `answered ${x.status} with a redirect; this error must not be redirected`, x);
      expect(x.status >= 400 && x.status < 500, `answered ${x.status}, not a 4xx`, x);
    });
  }
  await refusedByRedirect('authorize.no-code-challenge', 'invalid_request', (p) => {
    p.delete('code_challenge');
    p.delete('code_challenge_method');
  });
  await refusedByRedirect('authorize.plain-method', 'invalid_request', (p) => p.set('code_challenge_method', 'plain'));
  await refusedByRedirect('authorize.retired-scope', 'invalid_scope', (p) => p.set('scope', RETIRED_SCOPES[0]));
  await refusedDirectly('authorize.unknown-client', (p) => p.set('client_id', `unknown-${rand()}`));
  await refusedDirectly('authorize.unregistered-redirect-uri', (p) => p.set('redirect_uri', 'http://127.0.0.1:49999/not-registered'));

  // ---- the token endpoint ----
  const tokenRequest = (form: Record<string, string>) => wire('POST', endpoint('token_endpoint'), { form });
  const invalidGrant = (id: ServerCheckId, x: Exchange, what: string) => {
    errors[id] = errorFormat(x);
    expect(x.status === 400, `${what} answered ${x.status}, not 400`, x);
    expect(
      asRecord(x.body).error === 'invalid_grant',
      `${what}: error is ${JSON.stringify(asRecord(x.body).error)}, not "invalid_grant"`,
      x,
    );
  };
  await judge('token.wrong-code', async () => {
    if (!clientId) throw new Failure('needs the client that registration.public-client registers');
    const x = await tokenRequest({
      grant_type: 'authorization_code',
      code: rand(24),
      redirect_uri: redirectUri,
      client_id: clientId,
      code_verifier: strayVerifier(),
      resource: resourceId,
    });
    invalidGrant('token.wrong-code', x, 'a code the server never issued');
  });

  // ---- the stored login ----
  const needed = ['ask', ...(options.allowCharges ? ['research'] : []), ...(options.allowWrites ? ['training.write'] : [])];
  let main: StoredLogin | undefined;
  const loginOptions = (scope: string, identity = false): LoginOptions => ({
    scope,
    identity,
    browser: options.browser,
    timeoutMs: options.loginTimeoutMs,
    callbackPort: 0,
  });
  let loggedInNow = false;
  let noLogin: Error | undefined;
  const logIn = async (why: string) => {
    options.say(`agent-access: logging in to ${base} with scope "${needed.join(' ')}": ${why} (a consent screen opens)`);
    await storedLogin(session, loginOptions(needed.join(' ')));
    loggedInNow = true;
    main = (await session.store.read(base)).login ?? undefined;
  };
  try {
    const stored = (await session.store.read(base)).login;
    const held = new Set(stored?.scope.split(' ') ?? []);
    if (stored && stored.resource !== null && needed.every((s) => held.has(s))) main = stored;
    else
      await logIn(
        stored ? `the stored login ${stored.resource === null ? 'is an identity token' : `holds "${stored.scope}"`}` : 'no stored login',
      );
  } catch (e) {
    if (e instanceof ClientError && (e.kind === 'unreachable' || e.kind === 'interrupted')) throw e;
    options.say(`agent-access: no login to ${base}: ${(e as Error).message}`);
    noLogin = e as Error;
  }
  const withLogin = async (id: ServerCheckId, body: (login: StoredLogin) => Promise<void>) =>
    judge(id, async () => {
      if (!main)
        throw noLogin instanceof ClientError && noLogin.kind === 'denied'
          ? noLogin
          : new Failure(`needs a login, which could not be had: ${noLogin?.message ?? 'none'}`);
      await body(main);
    });

  await withLogin('refresh.rotates', async (stored) => {
    let answer: oauth.TokenEndpointResponse | undefined;
    let before = stored;
    const refresh = () => session.accessToken({ force: true, onTokens: (t) => (answer = t) });
    let after: StoredLogin;
    try {
      after = await refresh();
    } catch (e) {
      // A login stored long ago may have ended (revoked, replayed elsewhere): not the server's fault; one fresh login.
      if (!(e instanceof LoginRequiredError) || loggedInNow) throw e;
      await logIn(`the stored login is no longer valid (${e.message.replace(/ Run `.*$/, '')})`);
      if (!main) throw e;
      before = main;
      after = await refresh();
    }
    tokenResponse(answer as unknown as Record<string, unknown>, 'the refresh of the stored login');
    expect(
      typeof answer?.refresh_token === 'string' && answer.refresh_token !== before.refresh_token,
      'the refresh answer carried no new refresh token: it did not rotate',
    );
    const kept = (await session.store.read(base)).login;
    expect(kept?.refresh_token === after.refresh_token && kept.access_token === after.access_token, 'the token store was not updated');
    main = after;
    const x = await mcpProbe(after.access_token);
    expect(!refused(x), `the new access token was refused at /mcp (${x.status})`, x);
  });

  await withLogin('access-token.claims', async (login) => {
    const claims = tokenClaims(login.access_token);
    expect(claims !== null, 'the access token cannot be decoded (spec 2.3: it can)');
    const aud = claims!.aud;
    expect(aud === resourceId || (Array.isArray(aud) && aud.includes(resourceId)), `aud is ${JSON.stringify(aud)}, not "${resourceId}"`);
    expect(typeof claims!.client_id === 'string', 'client_id is missing');
    const scope = typeof claims!.scope === 'string' ? claims!.scope.split(' ') : [];
    const lacking = login.scope.split(' ').filter((s) => s && !scope.includes(s));
    expect(
      typeof claims!.scope === 'string' && lacking.length === 0,
      `scope is ${JSON.stringify(claims!.scope)}; granted: "${login.scope}"`,
    );
  });

  // ---- the REST guard without a token ----
  const jobId = `job-${rand()}`;
  const docId = `doc-${rand()}`;
  const routes: Array<{ method: string; path: string; scope: string; json?: unknown }> = [
    { method: 'POST', path: '/chat/ask', scope: 'ask', json: { question: 'Hallo?' } },
    { method: 'POST', path: '/research', scope: 'research', json: { question: 'Hallo?' } },
    { method: 'GET', path: `/research/${jobId}`, scope: 'research' },
    { method: 'POST', path: '/training', scope: 'training.write', json: { file_name: 'a.md', content: '# a' } },
    { method: 'GET', path: `/training/${docId}`, scope: 'training.write' },
    { method: 'GET', path: `/training/${docId}/url`, scope: 'training.write' },
  ];
  await judge('guard.no-token', async () => {
    for (const r of routes) {
      const x = await wire(r.method, `${base}${r.path}`, { json: r.json, key: r.json ? randomUUID() : undefined });
      errors[`guard.no-token ${r.method} ${r.path.replace(jobId, '{job_id}').replace(docId, '{document_id}')}`] = errorFormat(x);
      expect(x.status === 401, `${r.method} ${r.path} without a token answered ${x.status}, not 401`, x);
      const header = x.headers.get('www-authenticate');
      expect(header !== null && /^\s*bearer\b/i.test(header), `${r.method} ${r.path}: the 401 has no Bearer WWW-Authenticate`, x);
      const named = bearerChallenge(header!).scope?.split(' ') ?? [];
      expect(
        named.includes(r.scope),
        `${r.method} ${r.path}: WWW-Authenticate names scope ${JSON.stringify(bearerChallenge(header!).scope)}, not "${r.scope}"`,
        x,
      );
    }
  });

  // ---- extra logins: each a grant of its own, so the stored login is never put at risk ----
  async function extraLogin(id: ServerCheckId, why: string, scope: string, more: Partial<LoginOptions> = {}): Promise<Authorized> {
    options.say(`agent-access: ${id}: a consent screen of its own opens: ${why}`);
    return authorize(session, { ...loginOptions(scope, more.identity), ...more });
  }
  /** Ends an extra login's grant (RFC 7009), so the person keeps none the run made. */
  async function cleanUp(auth: Authorized | undefined, refreshToken?: string) {
    const token = refreshToken ?? auth?.tokens.refresh_token;
    if (!auth || !token || typeof meta.revocation_endpoint !== 'string') return;
    await wire('POST', meta.revocation_endpoint, { form: { token, token_type_hint: 'refresh_token', client_id: auth.clientId } }).catch(
      () => undefined,
    );
  }

  await judge('token.wrong-verifier', async () => {
    let seen: Exchange | undefined;
    const auth = await extraLogin('token.wrong-verifier', 'its code is sent first with a wrong code_verifier', 'ask', {
      beforeExchange: async (p) => {
        seen = await tokenRequest({
          grant_type: 'authorization_code',
          code: p.code,
          redirect_uri: p.redirectUri,
          client_id: p.clientId,
          code_verifier: strayVerifier(),
          ...(p.resource ? { resource: p.resource } : {}),
        });
      },
    }).catch((e: unknown) => {
      // A server may spend the code on the failed attempt; then the right verifier is refused too, which is allowed.
      if (seen && e instanceof ClientError && e.kind === 'auth_required') return undefined;
      throw e;
    });
    if (auth) tokenResponse(auth.tokens, 'the code exchange of token.wrong-verifier');
    await cleanUp(auth);
    expect(seen !== undefined, 'no code reached the exchange');
    invalidGrant('token.wrong-verifier', seen!, 'the code with a wrong code_verifier');
  });

  await judge('refresh.replay-ends-family', async () => {
    const auth = await extraLogin(
      'refresh.replay-ends-family',
      'its rotated refresh token is replayed, which ends its token family',
      'ask',
    );
    tokenResponse(auth.tokens, 'the code exchange of refresh.replay-ends-family');
    const first = auth.tokens.refresh_token;
    expect(typeof first === 'string', 'the code exchange gave no refresh token');
    const refresh = (token: string) =>
      tokenRequest({ grant_type: 'refresh_token', refresh_token: token, client_id: auth.clientId, resource: resourceId });
    const rotated = await refresh(first!);
    expect(rotated.status === 200, `the first refresh answered ${rotated.status}`, rotated);
    tokenResponse(asRecord(rotated.body), 'the refresh of refresh.replay-ends-family', rotated);
    const second = asRecord(rotated.body).refresh_token;
    const access = asRecord(rotated.body).access_token as string;
    expect(typeof second === 'string' && second !== first, 'the refresh did not rotate (no new refresh token)', rotated);
    const replay = await refresh(first!);
    invalidGrant('refresh.replay-ends-family', replay, 'the rotated refresh token sent again');
    const newest = await refresh(second as string);
    errors['refresh.replay-ends-family newest'] = errorFormat(newest);
    if (newest.status === 200) await cleanUp(auth, asRecord(newest.body).refresh_token as string);
    expect(
      newest.status === 400 && asRecord(newest.body).error === 'invalid_grant',
      `after the replay the newest refresh token still works (${newest.status}): the family lives on`,
      newest,
    );
    const probe = await mcpProbe(access);
    expect(probe.status === 401, `after the replay the family's access token is still accepted at /mcp (${probe.status})`, probe);
  });

  let narrow: string | undefined =
    main && !['research', 'training.write'].every((s) => main!.scope.split(' ').includes(s)) ? main.access_token : undefined;
  await judge('guard.identity-token', async () => {
    const auth = await extraLogin(
      'guard.identity-token',
      'a login without resource (an identity token), which the routes must refuse',
      'research',
      {
        identity: true,
      },
    );
    try {
      const rest = await wire('GET', `${base}/research/${jobId}`, { token: auth.tokens.access_token });
      errors['guard.identity-token GET /research/{job_id}'] = errorFormat(rest);
      expect(refused(rest), `an identity token was let through on GET /research/{job_id} (${rest.status})`, rest);
      const mcp = await mcpProbe(auth.tokens.access_token);
      errors['guard.identity-token /mcp'] = errorFormat(mcp);
      expect(refused(mcp), `an identity token was accepted at /mcp (${mcp.status})`, mcp);
    } finally {
      await cleanUp(auth);
    }
  });

  await judge('guard.revoked-grant', async () => {
    if (typeof meta.revocation_endpoint !== 'string')
      return skip('guard.revoked-grant', 'skipped (the server announces no revocation_endpoint)');
    const auth = await extraLogin('guard.revoked-grant', 'its grant is revoked (RFC 7009), then its access token must be refused', 'ask');
    const access = auth.tokens.access_token;
    narrow ??= access;
    await checkMissingScope();
    const before = await mcpProbe(access);
    expect(!refused(before), `its access token was refused before the revocation (${before.status})`, before);
    const revoke = await wire('POST', meta.revocation_endpoint, {
      form: { token: auth.tokens.refresh_token as string, token_type_hint: 'refresh_token', client_id: auth.clientId },
    });
    expect(revoke.status === 200, `the revocation answered ${revoke.status}, not 200 (RFC 7009 §2.2)`, revoke);
    const after = await mcpProbe(access);
    errors['guard.revoked-grant'] = errorFormat(after);
    expect(after.status === 401, `the access token of a revoked grant was accepted on the next request (${after.status})`, after);
  });

  async function checkMissingScope() {
    if (results.has('guard.missing-scope') || !narrow) return;
    const token = narrow;
    await judge('guard.missing-scope', async () => {
      const held = (tokenClaims(token)?.scope as string | undefined)?.split(' ') ?? main?.scope.split(' ') ?? [];
      const lacking = routes.filter((r) => r.method === 'GET' && !held.includes(r.scope));
      for (const r of lacking) {
        const x = await wire('GET', `${base}${r.path}`, { token });
        errors[`guard.missing-scope GET ${r.path.replace(jobId, '{job_id}').replace(docId, '{document_id}')}`] = errorFormat(x);
        expect(
          x.status >= 400 && x.status < 500 && x.status !== 404,
          `GET ${r.path} with a token without "${r.scope}" answered ${x.status}`,
          x,
        );
      }
    });
  }
  await checkMissingScope();
  if (!results.has('guard.missing-scope'))
    skip(
      'guard.missing-scope',
      main ? "skipped (needs --allow-extra-logins: the stored login holds every route's scope)" : 'skipped (no login)',
    );

  // ---- ask (charged) ----
  const fresh = async () => (await session.accessToken()).access_token;
  let askBody: { question: string } | undefined;
  const askKey = randomUUID();
  let firstAsk: Exchange | undefined;
  await withLogin('ask.answer', async () => {
    askBody = { question: 'Wann ist die Mittagsruhe?' };
    charged['POST /chat/ask']!++;
    const x = await wire('POST', `${base}/chat/ask`, { token: await fresh(), json: askBody, key: askKey });
    responses.push({ step: 'ask', status: x.status, body: x.body });
    expect(x.status === 200, `answered ${x.status}, not 200`, x);
    firstAsk = x;
    const b = asRecord(x.body);
    expect(typeof b.answer === 'string', 'answer is not a string', x);
    expect(Array.isArray(b.sources), 'sources is not an array', x);
    expect(typeof b.message_id === 'string', 'message_id is not a string', x);
  });
  await withLogin('ask.replay', async () => {
    if (!firstAsk) throw new Failure('needs the answer of ask.answer');
    const x = await wire('POST', `${base}/chat/ask`, { token: await fresh(), json: askBody, key: askKey });
    expect(x.status === firstAsk.status, `the replay answered ${x.status}, the first call ${firstAsk.status}`, x);
    expect(asRecord(x.body).message_id === asRecord(firstAsk.body).message_id, 'the replay carries another message_id', x);
    expect(x.text === firstAsk.text, 'the replay is not byte for byte the stored answer', x);
  });
  await withLogin('ask.key-conflict', async () => {
    if (!firstAsk) throw new Failure('needs the answer of ask.answer');
    charged['POST /chat/ask']!++;
    const x = await wire('POST', `${base}/chat/ask`, { token: await fresh(), json: { question: 'Eine andere Frage?' }, key: askKey });
    errors['ask.key-conflict'] = errorFormat(x);
    expect(x.status === 409, `the same key with another body answered ${x.status}, not 409`, x);
  });

  // ---- research (charged; polling is free) ----
  let job: { id: string; poll: string } | undefined;
  await withLogin('research.created', async () => {
    charged['POST /research']!++;
    const x = await wire('POST', `${base}/research`, {
      token: await fresh(),
      json: { question: 'Welche Ruhezeiten gelten laut Hausordnung?' },
      key: randomUUID(),
    });
    responses.push({ step: 'research.created', status: x.status, body: x.body });
    expect(x.status === 202, `answered ${x.status}, not 202`, x);
    const b = asRecord(x.body);
    expect(typeof b.job_id === 'string', 'job_id is not a string', x);
    job = {
      id: b.job_id as string,
      poll: typeof b.poll === 'string' && b.poll.startsWith('/') ? b.poll : `/research/${b.job_id as string}`,
    };
    expect(b.status === 'queued', `status is ${JSON.stringify(b.status)}, not "queued"`, x);
    expect(b.poll === `/research/${b.job_id as string}`, `poll is ${JSON.stringify(b.poll)}, not "/research/${b.job_id as string}"`, x);
  });
  const statuses: string[] = [];
  await withLogin('research.succeeds', async () => {
    if (!job) throw new Failure('needs the job of research.created');
    const deadline = Date.now() + options.researchTimeoutMs;
    for (;;) {
      const x = await wire('GET', `${base}${job.poll}`, { token: await fresh() });
      responses.push({ step: 'research.poll', status: x.status, body: x.body });
      expect(x.status === 200, `a poll answered ${x.status}`, x);
      const b = asRecord(x.body);
      if (typeof b.status === 'string' && !statuses.includes(b.status)) statuses.push(b.status);
      if (b.error !== undefined) throw new Failure(`the job failed: ${JSON.stringify(b.error)}`, x);
      if (b.status === 'succeeded') {
        expect(b.report !== undefined, 'succeeded without report', x);
        expect(Array.isArray(b.citations), 'citations is not an array', x);
        return;
      }
      expect(
        Date.now() < deadline,
        `not succeeded within ${Math.round(options.researchTimeoutMs / 1000)} s (status ${JSON.stringify(b.status)})`,
        x,
      );
      await sleep(Math.max(1_000, Math.min(retryAfterMs(x.headers.get('retry-after') ?? undefined, Date.now()) ?? 0, 30_000)));
    }
  });

  // ---- training (writes) ----
  let docIdSeen: string | undefined;
  const steps: string[] = [];
  await withLogin('training.accepted', async () => {
    const x = await wire('POST', `${base}/training`, {
      token: await fresh(),
      json: {
        file_name: 'agent-access-conformance.md',
        content: '# agent-access conformance server\n\nEin kurzes Dokument, das `agent-access conformance server` hinzugefügt hat.\n',
      },
      key: randomUUID(),
    });
    responses.push({ step: 'training.accepted', status: x.status, body: x.body });
    expect(x.status === 202, `answered ${x.status}, not 202`, x);
    const b = asRecord(x.body);
    const idField =
      ['document_id', 'job_id', 'id'].find((k) => typeof b[k] === 'string') ??
      Object.keys(b).find((k) => /id$/i.test(k) && typeof b[k] === 'string');
    expect(idField !== undefined, 'the 202 carries no job id', x);
    docIdSeen = b[idField!] as string;
  });
  await withLogin('training.status', async () => {
    if (!docIdSeen) throw new Failure('needs the id of training.accepted');
    // Looked at until the step stands still three times (its values and their end are not shown), 30 looks at most.
    for (let look = 0, same = 0; look < 30 && same < 3; look++) {
      const x = await wire('GET', `${base}/training/${docIdSeen}`, { token: await fresh() });
      responses.push({ step: 'training.status', status: x.status, body: x.body });
      expect(x.status === 200, `answered ${x.status}, not 200`, x);
      const step = asRecord(x.body).processing_step;
      expect(step !== undefined, 'holds no processing_step', x);
      const text = typeof step === 'string' ? step : JSON.stringify(step);
      if (steps.at(-1) === text) same++;
      else steps.push(text);
      if (same < 3) await sleep(1_000);
    }
  });
  await withLogin('training.url', async () => {
    if (!docIdSeen) throw new Failure('needs the id of training.accepted');
    const x = await wire('GET', `${base}/training/${docIdSeen}/url`, { token: await fresh() });
    responses.push({ step: 'training.url', status: x.status, body: x.body });
    expect(x.status >= 200 && x.status < 300, `answered ${x.status}`, x);
  });

  await judge('guard.rate-limit-headers', async () => {
    // Without an answer a token got through the guard for (no login), there is nothing to look at.
    if (rateLimit.seen === 0) return skip('guard.rate-limit-headers', 'skipped (no request passed the guard: no login)');
    expect(rateLimit.missing.length === 0, rateLimit.missing.join('; '));
  });

  // ---- the report ----
  const first = (step: ObservedResponse['step']) => responses.filter((r) => r.step === step && r.status < 300).map((r) => asRecord(r.body));
  const elementShapes = (list: unknown) => (Array.isArray(list) ? [...new Set(list.map(shapeOf))] : []);
  const polls = first('research.poll');
  const observations: Record<string, unknown> = {
    errors,
    ratelimit_limit: rateLimit.limit,
    ...(first('ask').length ? { sources_element: elementShapes(first('ask')[0]!.sources) } : {}),
    ...(polls.some((p) => p.citations !== undefined)
      ? { citations_element: elementShapes(polls.find((p) => p.citations)!.citations) }
      : {}),
    ...(polls.some((p) => p.report !== undefined) ? { report_type: shapeOf(polls.find((p) => p.report !== undefined)!.report) } : {}),
    ...(polls.some((p) => p.error !== undefined) ? { error_type: shapeOf(polls.find((p) => p.error !== undefined)!.error) } : {}),
    ...(statuses.length ? { research_statuses: statuses } : {}),
    ...(steps.length ? { processing_steps: steps } : {}),
    ...(first('training.accepted').length ? { training_202_fields: Object.keys(first('training.accepted')[0]!).sort() } : {}),
    ...(first('training.url').length ? { training_url_fields: Object.keys(first('training.url')[0]!).sort() } : {}),
  };
  const calls = CHARGED_ROUTES.reduce((n, r) => n + charged[r]!, 0);
  const asks = charged['POST /chat/ask']!;
  const research = charged['POST /research']!;
  // The reused key with another body costs nothing where the server answers 409 as it must.
  const akh = (askCount: number) => addAmount(askCount * DEFAULT_PRICES.ask, research * DEFAULT_PRICES.research);
  const note =
    calls === 0
      ? 'No charged call was made: nothing was charged.'
      : `Charged calls made: ${calls} (POST /chat/ask ${asks}, POST /research ${research}), each with an Idempotency-Key, so one ` +
        `charge each at most: at the emulator's prices (${DEFAULT_PRICES.ask} AKh an ask, ${DEFAULT_PRICES.research} a research job) at ` +
        `most ${akh(asks)} AKh, ${akh(Math.min(asks, 1))} AKh where the reused key is refused with 409 as it must be. The spec states no ` +
        `prices: the server's may differ.`;
  const scenarios: ScenarioReport[] = GROUPS.map((group) => {
    const checks = (Object.keys(SERVER_CHECKS) as ServerCheckId[])
      .filter((id) => SERVER_CHECKS[id].group === group)
      .map((id) => results.get(id) ?? { id, rule: SERVER_CHECKS[id].rule, verdict: 'skipped' as const, message: 'skipped (not reached)' });
    const verdict = scenarioVerdict(checks);
    return {
      name: group,
      description: group,
      verdict: verdict === 'not_exercised' ? 'skipped' : verdict,
      exit_code: null,
      duration_ms: 0,
      checks,
    };
  });
  const all = scenarios.flatMap((s) => s.checks);
  for (const c of all) if (!emitted.has(c.id)) options.onCheck?.(c);
  const report: ConformanceReport = {
    version: 1,
    kind: 'server',
    command: ['conformance', 'server', '--base-url', base],
    base_url: base,
    scenarios,
    summary: summarizeChecks(all),
    observations,
    charges: { calls, routes: charged, note },
  };
  return { report, responses };
}
