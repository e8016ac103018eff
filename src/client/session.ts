import type * as oauth from 'oauth4webapi';
import { ClientError } from '../protocol/errors.js';
import { configDir, type ClientContext } from './context.js';
import { resolveBaseUrl, type BaseUrlSource } from './base-url.js';
import { apiError, bearerChallenge, HttpClient, type ApiRequest, type ApiResponse } from './http.js';
import type { Discovered } from './oauth.js';
import { isLoopbackHost } from '../protocol/loopback.js';
import { forServer, identityOf, keyIdOf, TokenStore, type ServerRecord, type StoredLogin } from './token-store.js';

/** By default `token` hands out an access token only while it stays valid this long; otherwise it refreshes. */
export const DEFAULT_MIN_TTL_MS = 60_000;

/** The login is gone for good: the person must authorize again (grant revoked, family invalidated, logged out). */
export class LoginRequiredError extends ClientError {
  /** `first`: there never was a login here, so the advice is to log in, not to log in "again". */
  constructor(baseUrl: string, why: string, first = false) {
    super('auth_required', `${why}. Run \`agent-access login --base-url ${baseUrl}\`${first ? '' : ' again'}.`, 'client.login_required');
  }
}

/**
 * Why the server refused a refresh token, as it said it (a revoked grant, a replay, an expiry): its
 * error_description without the hint for client developers and without "authorize again", which the command says.
 */
export function refusalCause(description: string | undefined): string {
  const cause = description
    ?.replace(/\.?\s*Hint: [\s\S]*$/, '')
    .replace(/[;,.]?\s*authorize again\.?$/i, '')
    .trim();
  return cause || 'the server refused its refresh token (invalid_grant) without saying why';
}

/** Stored tokens from a token endpoint answer, timed on the client's clock. */
export function loginFrom(
  tokens: oauth.TokenEndpointResponse,
  now: number,
  base: Pick<StoredLogin, 'client_id' | 'redirect_uri' | 'resource'> & Partial<StoredLogin>,
  previous?: StoredLogin,
): StoredLogin {
  const rotated = typeof tokens.refresh_token === 'string';
  return {
    client_id: base.client_id,
    redirect_uri: base.redirect_uri,
    resource: base.resource,
    scope: tokens.scope ?? previous?.scope ?? '',
    access_token: tokens.access_token,
    refresh_token: rotated ? tokens.refresh_token : (previous?.refresh_token ?? null),
    expires_at: now + (typeof tokens.expires_in === 'number' ? tokens.expires_in : 900) * 1_000,
    token_obtained_at: now,
    refresh_obtained_at: rotated ? now : (previous?.refresh_obtained_at ?? null),
    logged_in_at: previous?.logged_in_at ?? now,
    refresh_count: previous ? previous.refresh_count + 1 : 0,
  };
}

/** A command's connection to one server: where it is, its stored login, and an HTTP client closed at the end. */
export class Session {
  readonly http: HttpClient;
  #discovered: Promise<Discovered> | undefined;

  private constructor(
    readonly ctx: ClientContext,
    readonly store: TokenStore,
    readonly baseUrl: string,
    readonly source: BaseUrlSource,
    /** Why this server: completes "{base_url} is …" (see resolveBaseUrl). */
    readonly why: string,
    /** The signing key of the emulator this directory runs on that address, known from its admin file. */
    readonly emulatorKeyId: string | null,
  ) {
    this.http = new HttpClient(ctx);
  }

  static async open(ctx: ClientContext, baseUrlFlag: string | undefined): Promise<Session> {
    const store = new TokenStore(configDir(ctx.env));
    const { baseUrl, source, why, emulatorKeyId } = await resolveBaseUrl(ctx, baseUrlFlag, store);
    return new Session(ctx, store, baseUrl, source, why, emulatorKeyId);
  }

  /**
   * Emulators of several projects take turns on one loopback address, each signing with the key of its own state
   * folder: their logins are told apart by that key. A real server's logins stay one (its keys may rotate).
   */
  get #onLoopback(): boolean {
    return isLoopbackHost(new URL(this.baseUrl).hostname);
  }

  /** The key ids of the server on this address now (its JWKS), or null when it cannot be told. */
  async #serverKeys(): Promise<Set<string> | null> {
    if (!this.#onLoopback) return null;
    const { as } = await this.discover();
    if (!as.jwks_uri) return null;
    try {
      const answer = await this.http.send({ method: 'GET', url: as.jwks_uri });
      const keys = (answer.body as { keys?: unknown } | null)?.keys;
      if (answer.status !== 200 || !Array.isArray(keys)) return null;
      const kids = keys.map((key) => (key as { kid?: unknown } | null)?.kid).filter((kid): kid is string => typeof kid === 'string');
      return kids.length > 0 ? new Set(kids) : null;
    } catch {
      return null;
    }
  }

  /**
   * `record`, made the one of the server whose keys are `keys` (see forServer): what to write, and what to say.
   * A login kept for that server comes back (said on stderr); without one, the error says so in one true line.
   */
  async #switched(record: ServerRecord, keys: ReadonlySet<string>): Promise<{ record: ServerRecord; error?: string } | null> {
    const was = await identityOf(record);
    const next = await forServer(record, keys, this.ctx.clock.now());
    if (!next || was === null) return null;
    if (next.login) {
      this.ctx.stderr.write(
        `agent-access: ${this.baseUrl} is another emulator than the last one there; using the login kept for it ` +
          `(from ${new Date(next.login.logged_in_at).toISOString()})\n`,
      );
      return { record: next };
    }
    const key = [...keys][0]!;
    return {
      record: next,
      error:
        `${this.baseUrl} is now another emulator (signing key ${short(key)}, where the stored ` +
        `login's is ${short(was)}); that login is kept for when its emulator is back`,
    };
  }

  /** Before a login: the record is made the one of the server on this address now, so nothing of another is reused or revoked. */
  async matchServer(): Promise<void> {
    const keys = await this.#serverKeys();
    if (!keys) return;
    await this.store.update(this.baseUrl, async (record) => ({ record: (await this.#switched(record, keys))?.record, result: undefined }));
  }

  /**
   * A failure to reach the server, completed with which server that was and why this one: a command that falls
   * back to the last login's server must not leave the person guessing where it tried to go.
   */
  explain(error: unknown): unknown {
    if (!(error instanceof ClientError) || error.kind !== 'unreachable') return error;
    return new ClientError('unreachable', `${error.message.replace(/\.$/, '')}. ${this.baseUrl} is ${this.why}`, error.code);
  }

  /**
   * Discovery runs at most once per command, and only when a command needs the authorization server; so does
   * loading the OAuth client (`token` with a valid token needs neither).
   */
  discover(): Promise<Discovered> {
    this.#discovered ??= import('./oauth.js').then(({ discover }) => discover(this.http, this.baseUrl));
    return this.#discovered;
  }

  async close(): Promise<void> {
    await this.http.close();
  }

  async login(): Promise<StoredLogin> {
    let record = await this.store.read(this.baseUrl);
    // This directory's emulator is known offline by its admin file: a login of another one on the address is not used.
    const here = this.#onLoopback ? this.emulatorKeyId : null;
    if (here !== null && record.login && (await identityOf(record)) !== here) {
      const keys = new Set([here]);
      const outcome = await this.store.update(this.baseUrl, async (fresh) => {
        const switched = await this.#switched(fresh, keys);
        return { record: switched?.record, result: switched ?? { record: fresh } };
      });
      if (outcome.error) throw new LoginRequiredError(this.baseUrl, outcome.error, true);
      record = outcome.record;
    }
    if (!record.login) throw new LoginRequiredError(this.baseUrl, `not logged in to ${this.baseUrl}`, record.issuer === null);
    return record.login;
  }

  /**
   * An access token valid for at least `minTtlMs` more on the client's clock, refreshing (with rotation) when
   * it is not. The refresh runs under the store's lock on a fresh read: when another process rotated the
   * token meanwhile, its result is used instead of spending the old refresh token a second time.
   */
  async accessToken(
    options: { minTtlMs?: number; force?: boolean; onTokens?: (tokens: oauth.TokenEndpointResponse) => void } = {},
  ): Promise<StoredLogin> {
    const minTtl = options.minTtlMs ?? DEFAULT_MIN_TTL_MS;
    const seen = await this.login();
    if (!options.force && seen.expires_at - this.ctx.clock.now() >= minTtl) return seen;
    // Ctrl-C between the server's rotation and the write would leave a spent refresh token on disk, and the
    // next refresh would be a replay that ends the family: the refresh-and-write step is not interrupted.
    const offInterrupt = this.ctx.onInterrupt?.(() => this.ctx.stderr.write('agent-access: finishing the token refresh first\n'));
    const outcome = await this.store
      .update<{ login: StoredLogin } | { error: string; first?: boolean } | { switched: true }>(this.baseUrl, async (record) => {
        const current = record.login;
        if (!current) return { result: { error: `not logged in to ${this.baseUrl} (logged out meanwhile)` } };
        if (current.refresh_token !== seen.refresh_token || current.access_token !== seen.access_token)
          return { result: { login: current } };
        if (!current.refresh_token) return { result: { error: 'the access token expired and the server gave no refresh token' } };
        const [{ as }, { oauthFailure, refreshTokens }, { ResponseBodyError }] = await Promise.all([
          this.discover(),
          import('./oauth.js'),
          import('oauth4webapi'),
        ]);
        // Tokens and the registration belong to the authorization server that issued them (MCP SEP-2352): when the
        // server now names another, they are never presented to it; the person logs in there anew.
        if (record.issuer !== null && record.issuer !== as.issuer)
          return {
            record: { ...record, login: null, clients: {} },
            result: {
              error: `${this.baseUrl} now names another authorization server (${as.issuer}, was ${record.issuer}); the login there is needed anew`,
            },
          };
        let tokens: oauth.TokenEndpointResponse;
        try {
          tokens = await refreshTokens(this.http, as, {
            clientId: current.client_id,
            refreshToken: current.refresh_token,
            resource: current.resource,
          });
        } catch (e) {
          if (e instanceof ResponseBodyError && (e.error === 'invalid_grant' || e.error === 'invalid_client')) {
            // Refused by another emulator that now has this address: its login is parked, not forgotten.
            const keys = await this.#serverKeys();
            const switched = keys && (await this.#switched(record, keys));
            if (switched)
              return { record: switched.record, result: switched.error ? { error: switched.error, first: true } : { switched: true } };
            // Spent for good: keep the client registration, forget the tokens.
            const why =
              e.error === 'invalid_grant'
                ? `the login to ${this.baseUrl} is no longer valid: ${refusalCause(e.error_description)}`
                : `the server no longer knows client ${current.client_id}`;
            return {
              record: { ...record, login: null, clients: e.error === 'invalid_client' ? {} : record.clients },
              result: { error: why },
            };
          }
          throw oauthFailure('refresh', e);
        }
        options.onTokens?.(tokens);
        const login = loginFrom(tokens, this.ctx.clock.now(), current, current);
        // A record written before key ids were kept learns its own here, once (then `token` never decodes one).
        const keyId = record.key_id ?? (await keyIdOf(login.access_token));
        return { record: { ...record, key_id: keyId, login }, result: { login } };
      })
      .finally(() => offInterrupt?.());
    if ('error' in outcome) throw new LoginRequiredError(this.baseUrl, outcome.error, outcome.first);
    // Its own login came back: used as any stored login is (refreshed when close to expiry). No second switch follows,
    // since that login is the server's now.
    if ('switched' in outcome) return this.accessToken({ ...options, force: false });
    return outcome.login;
  }

  /**
   * A resource request with the stored token. A 401 `invalid_token` gets one refresh and one retry (the
   * server refused before doing anything, so resending is safe); other errors become plain messages.
   */
  async call(req: Omit<ApiRequest, 'token' | 'url'> & { path: string }): Promise<ApiResponse> {
    const full: ApiRequest = { ...req, url: `${this.baseUrl}${req.path}` };
    let login = await this.accessToken();
    let res = await this.http.send({ ...full, token: login.access_token });
    if (res.status === 401 && bearerChallenge(res.headers['www-authenticate']).error === 'invalid_token') {
      login = await this.accessToken({ force: true });
      res = await this.http.send({ ...full, token: login.access_token });
    }
    if (res.status >= 400) throw apiError(res, full, login.scope);
    return res;
  }
}

/** A key id short enough for a line, long enough to tell two apart. */
const short = (kid: string): string => (kid.length > 10 ? `${kid.slice(0, 8)}…` : kid);
