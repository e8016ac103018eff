import * as oauth from 'oauth4webapi';
import { ClientError } from '../protocol/errors.js';
import { checkRequestedScopes } from '../protocol/scope-request.js';
import { CALLBACK_PATH, LoopbackReceiver, type CallbackOutcome } from './loopback.js';
import {
  authorizationRequest,
  exchangeCode,
  oauthFailure,
  registerClient,
  revokeToken,
  validateRedirect,
  type Discovered,
} from './oauth.js';
import { Progress } from './progress.js';
import { describeLogin, type LoginResult } from './login-view.js';
import { loginFrom, refusalCause, type Session } from './session.js';
import { isLoopbackHost } from '../protocol/loopback.js';
import { forServer, keyIdOf, type StoredLogin } from './token-store.js';

export interface LoginOptions {
  scope: string;
  /** No `resource`: an identity token, refused by workspace tools (spec 4.2, 5.8). */
  identity: boolean;
  /**
   * `open`: open the browser; `print`: print the URL (SSH sessions); `none`: no browser at all, the URL is requested
   * over HTTP and its redirect followed, which only a consent policy of the emulator can answer (CI).
   */
  browser: 'open' | 'print' | 'none';
  timeoutMs: number;
  /** Port of the loopback listener; 0 picks a free one. */
  callbackPort: number;
  /** Sees the code before it is exchanged (`conformance server` first sends it with a wrong verifier). */
  beforeExchange?(p: { code: string; clientId: string; redirectUri: string; resource: string | null }): Promise<void>;
}

/** The redirect URI registered once per server: loopback without a port, since any port must match (RFC 8252 §7.3, OAuth 2.1 §8.4.2). */
export const REGISTERED_REDIRECT_URI = `http://127.0.0.1${CALLBACK_PATH}`;

/**
 * Spec 2.7, 5.9: unknown and retired scopes are refused here, before any request (against the spec's list); after
 * discovery, so are scopes the server does not announce.
 */
export function checkScopes(scope: string, supported?: string[]): string {
  const known = checkRequestedScopes(scope);
  return supported ? checkRequestedScopes(known, supported, 'the server') : known;
}

/**
 * `agent-access login`: discovery, registration (cached), PKCE S256 with a single-use state, a loopback
 * listener for the redirect, the browser, `state` and `iss` checked, the code exchanged, tokens stored.
 */
export async function login(session: Session, options: LoginOptions): Promise<LoginResult & { replaced_login: ReplacedLogin | null }> {
  // First, so that the registration and the login this one replaces are this server's, not another emulator's.
  await session.matchServer();
  const { discovered, resource, tokens, clientId, fresh } = await authorize(session, options);
  const now = session.ctx.clock.now();
  const stored = loginFrom(tokens, now, { client_id: clientId, redirect_uri: REGISTERED_REDIRECT_URI, resource });
  const keyId = await keyIdOf(tokens.access_token);
  const onLoopback = isLoopbackHost(new URL(session.baseUrl).hostname);
  const replaced = await session.store.update(session.baseUrl, async (record) => {
    // A login another emulator on this address signed is kept for it, never revoked here (this server never knew it).
    const mine = (onLoopback && keyId !== null && (await forServer(record, new Set([keyId]), now))) || record;
    return {
      record: { ...mine, issuer: discovered.as.issuer, key_id: keyId, login: stored },
      result: mine.issuer === discovered.as.issuer ? mine.login : null,
    };
  });
  // The login this one replaces is revoked (RFC 7009), so the person keeps no grant that nothing uses any more.
  const previous = replaced ? await revokeReplaced(session, discovered, replaced) : null;
  return { ...describeLogin(session.baseUrl, discovered.as.issuer, stored, fresh), replaced_login: previous };
}

/** What one pass through the consent screen gave: the tokens, not yet stored anywhere. */
export interface Authorized {
  discovered: Discovered;
  resource: string | null;
  tokens: oauth.TokenEndpointResponse;
  clientId: string;
  /** The client was registered for this login (no cached registration). */
  fresh: boolean;
}

/**
 * The flow of `login` up to the tokens, which it leaves to the caller: `login` stores them, `conformance server`
 * uses a grant of its own for a check and never touches the stored login.
 */
export async function authorize(session: Session, options: LoginOptions): Promise<Authorized> {
  const { ctx } = session;
  let scope = checkScopes(options.scope);
  const discovered = await session.discover();
  scope = checkScopes(scope, discovered.as.scopes_supported);
  const resource = options.identity ? null : discovered.resource;

  type Done = { tokens: oauth.TokenEndpointResponse; clientId: string; redirectUri: string };
  let pending: { clientId: string; state: string; verifier: string; redirectUri: string } | undefined;
  const receiver = await LoopbackReceiver.listen<Done>(options.callbackPort, async (url): Promise<CallbackOutcome<Done>> => {
    if (!pending || url.searchParams.get('state') !== pending.state) {
      // A stale tab, a reload after the first answer, or a forged request: not ours, keep waiting for the real redirect.
      return {
        status: 400,
        title: 'Unbekannte Anmeldung',
        message: 'Diese Antwort gehört zu keiner laufenden Anmeldung von agent-access. Sie können diesen Tab schließen.',
      };
    }
    // Single use (RFC 6749 §10.12): taken before anything is awaited, so a reload cannot exchange the code twice.
    const p = pending;
    pending = undefined;
    let params: URLSearchParams;
    try {
      params = validateRedirect(discovered.as, p.clientId, url, p.state);
    } catch (e) {
      if (e instanceof oauth.AuthorizationResponseError && e.error === 'access_denied') {
        return {
          status: 200,
          title: 'Zugriff abgelehnt',
          message: 'Sie haben den Zugriff abgelehnt; agent-access erhält keine Tokens. Sie können diesen Tab schließen.',
          done: {
            error: new ClientError(
              'denied',
              'access denied: the person clicked "Ablehnen" on the consent screen; no tokens were issued',
              'client.access_denied',
            ),
          },
        };
      }
      const failure = oauthFailure('authorization', e);
      return {
        status: 400,
        title: 'Anmeldung fehlgeschlagen',
        message: `${failure.message}. Sie können diesen Tab schließen.`,
        done: { error: failure },
      };
    }
    try {
      await options.beforeExchange?.({ code: params.get('code') ?? '', clientId: p.clientId, redirectUri: p.redirectUri, resource });
      const tokens = await exchangeCode(session.http, discovered.as, {
        clientId: p.clientId,
        redirectUri: p.redirectUri,
        params,
        verifier: p.verifier,
        resource,
      });
      return {
        status: 200,
        title: 'Anmeldung abgeschlossen',
        message: 'agent-access ist angemeldet. Sie können diesen Tab jetzt schließen.',
        done: { value: { tokens, clientId: p.clientId, redirectUri: p.redirectUri } },
      };
    } catch (e) {
      const failure = oauthFailure('code exchange', e);
      return {
        status: 502,
        title: 'Anmeldung fehlgeschlagen',
        message: `${failure.message}. Sie können diesen Tab schließen.`,
        done: { error: failure },
      };
    }
  });

  let progress: Progress | undefined;
  let ended: ClientError | undefined;
  const end = (error: ClientError) => {
    ended ??= error;
    pending = undefined; // a redirect arriving after this is not accepted
    receiver.abort(error);
  };
  const offInterrupt = ctx.onInterrupt?.(() => end(new ClientError('interrupted', 'login cancelled', 'client.cancelled')));
  const timer = setTimeout(
    () =>
      end(
        new ClientError(
          'failed',
          `no answer from the browser within ${Math.round(options.timeoutMs / 1_000)} s; run \`agent-access login\` again: ${WITHOUT_BROWSER}`,
          'client.login_timeout',
        ),
      ),
    options.timeoutMs,
  );
  try {
    const redirectUri = `http://127.0.0.1:${receiver.port}${CALLBACK_PATH}`;
    const { clientId, fresh } = await clientFor(session, discovered, { scope, resource, redirectUri });
    const request = await authorizationRequest(discovered.as, { clientId, redirectUri, scope, resource });
    if (ended) throw ended; // cancelled or timed out during discovery or registration: no browser
    pending = { clientId, state: request.state, verifier: request.verifier, redirectUri };

    if (options.browser === 'none') {
      void answerWithoutBrowser(session, request.url, new URL(redirectUri).origin).catch((e: unknown) =>
        end(e instanceof ClientError ? e : new ClientError('failed', (e as Error).message)),
      );
    } else if (options.browser === 'open') {
      ctx.stderr.write(`Opening the consent page in your browser. If it does not open, visit:\n  ${request.url}\n`);
      // Not awaited: an opener that fails is told at once, and the wait goes on for the URL to be used elsewhere.
      ctx.openUrl(request.url).catch((e: Error) => {
        if (ended) return;
        const line = `agent-access: could not open a browser: ${e.message}. Open ${request.url} in a browser yourself; ${WITHOUT_BROWSER}`;
        if (progress) progress.say(line);
        else ctx.stderr.write(`${line}\n`);
      });
    } else {
      ctx.stderr.write(`Open this URL in a browser to log in:\n  ${request.url}\n`);
    }
    const where = new URL(request.url).origin;
    progress = new Progress(
      ctx,
      options.browser === 'none'
        ? `Requesting the consent page on ${where} without a browser…`
        : `Waiting for the consent page on ${where} (Ctrl-C cancels)…`,
    );
    const done = await receiver.result;
    progress.stop();
    progress = undefined;

    return { discovered, resource, tokens: done.tokens, clientId: done.clientId, fresh };
  } finally {
    progress?.stop();
    clearTimeout(timer);
    offInterrupt?.();
    await receiver.close();
  }
}

/** What became of the login a new one replaced: revoked at the server, or why not (then also a warning). */
export interface ReplacedLogin {
  client_id: string;
  revoked: boolean;
  note: string;
}

/** Revokes a replaced login's grant; a failure is a warning (the new login stands), never an error. */
async function revokeReplaced(session: Session, discovered: Discovered, login: StoredLogin): Promise<ReplacedLogin> {
  let revoked = false;
  let note: string;
  try {
    revoked = await revokeToken(session.http, discovered.as, {
      clientId: login.client_id,
      token: login.refresh_token ?? login.access_token,
      hint: login.refresh_token ? 'refresh_token' : 'access_token',
    });
    note = revoked
      ? `revoked its ${login.refresh_token ? 'refresh' : 'access'} token at the server (RFC 7009), which ends its grant`
      : 'the server offers no revocation endpoint; revoke its grant in the settings page';
  } catch (e) {
    // A server that does not know the client holds no grant of it: nothing is left to revoke, nothing to advise.
    if (e instanceof ClientError && e.code === 'oauth.invalid_client')
      return { client_id: login.client_id, revoked: false, note: 'the server does not know its client, so it holds no grant of it' };
    note = `could not revoke it at the server (${refusalCause(e instanceof ClientError ? e.message : String(e))}); revoke its grant in the settings page`;
  }
  if (!revoked) session.ctx.stderr.write(`agent-access: warning: the login this one replaced: ${note}\n`);
  return { client_id: login.client_id, revoked, note };
}

/** How to log in when no browser opens here: said when the opener fails and when the wait times out. */
const WITHOUT_BROWSER =
  'with --no-browser the URL is printed to open anywhere (add --callback-port PORT and forward it when the browser is on another ' +
  'machine, as over SSH); in CI, --headless with a consent policy (serve --consent approve)';

/**
 * `login --headless`: the authorization URL is requested like a browser would, and its redirect followed to
 * this login's listener. A person's consent page (200) cannot be answered this way: that needs a consent policy.
 */
async function answerWithoutBrowser(session: Session, url: string, listener: string): Promise<void> {
  const answer = await session.http.send({ method: 'GET', url });
  const location = answer.headers.location;
  if (answer.status >= 300 && answer.status < 400 && typeof location === 'string') {
    const target = new URL(location, url);
    // Only our own listener: an error redirect elsewhere would be a server bug, and no code goes anywhere else.
    if (target.origin !== listener)
      throw new ClientError(
        'failed',
        `the authorization endpoint redirected to ${target.origin}, not to this login's listener ${listener}`,
        'client.login_redirect',
      );
    // The listener's answer is this login's own outcome (a failed code exchange is its 502), which the wait reports.
    await session.http.send({ method: 'GET', url: target.href, retry: false });
    return;
  }
  if (answer.status === 200) {
    throw new ClientError(
      'denied',
      'the consent page waits for a person; without a browser, login needs a consent policy that answers for them (agent-access serve ' +
        '--consent approve, or consent.set in test code)',
      'client.consent_needs_person',
    );
  }
  throw new ClientError(
    'failed',
    `the authorization endpoint answered ${answer.status}: ${answer.text.slice(0, 300)}`,
    'client.login_failed',
  );
}

/**
 * The cached registration for this server and redirect URI, or a new one. A cached client is first tried
 * against the authorization endpoint: a server that forgot it (an emulator started afresh) answers with an error
 * page instead of a redirect, and the client is registered again instead of sending the person there.
 */
async function clientFor(
  session: Session,
  discovered: Discovered,
  p: { scope: string; resource: string | null; redirectUri: string },
): Promise<{ clientId: string; fresh: boolean }> {
  const { as } = discovered;
  const cached = await session.store.read(session.baseUrl);
  const known = cached.issuer === as.issuer ? cached.clients[REGISTERED_REDIRECT_URI] : undefined;
  if (known) {
    const probe = new URL(
      (await authorizationRequest(as, { clientId: known.client_id, redirectUri: p.redirectUri, scope: p.scope, resource: p.resource })).url,
    );
    // With a PKCE challenge too short to be one, the request stops before consent (a known client gets an error
    // redirect, an unknown one an error page), so probing never shows a page nor lets a consent policy answer it.
    // Every parameter is there: the probe is no client mistake (no client finding).
    probe.searchParams.set('code_challenge', 'probe');
    const answer = await session.http.send({ method: 'GET', url: probe.href });
    if (answer.status < 400) return { clientId: known.client_id, fresh: false };
  }
  const clientId = await registerClient(session.http, as, REGISTERED_REDIRECT_URI);
  const registeredAt = session.ctx.clock.now();
  await session.store.update(session.baseUrl, async (record) => {
    const clients = record.issuer === as.issuer ? record.clients : {};
    return {
      record: {
        ...record,
        issuer: as.issuer,
        clients: {
          ...clients,
          [REGISTERED_REDIRECT_URI]: { client_id: clientId, redirect_uri: REGISTERED_REDIRECT_URI, registered_at: registeredAt },
        },
      },
      result: undefined,
    };
  });
  return { clientId, fresh: true };
}
