import { Command, InvalidArgumentError, Option } from 'commander';
import type { ClientContext } from '../../client/context.js';
import type { Session } from '../../client/session.js';
import { CliError, EXIT } from '../errors.js';
import { age, relativeTime } from '../../protocol/format.js';
import { checkRequestedScopes } from '../../protocol/scope-request.js';
import { SUPPORTED_SCOPES } from '../../protocol/scopes.js';
import { jsonText } from '../output.js';
import { secondsFlag } from '../seconds.js';

interface CommonFlags {
  baseUrl?: string;
  json?: boolean;
}

const baseUrlOption = () =>
  new Option(
    '--base-url <url>',
    'the service ({base_url}); default $AGENT_ACCESS_BASE_URL, else an emulator running here, else the last login',
  );

/** Whole seconds within [min, max]; timers cannot wait longer than 2^31-1 ms. */
const port = (value: string): number => {
  if (!/^\d+$/.test(value) || Number(value) > 65_535) throw new InvalidArgumentError('a port from 0 to 65535 (0: a free one)');
  return Number(value);
};

/** Opens a session for one command run and closes its connections at the end. */
export async function withSession<T>(ctx: ClientContext, flags: CommonFlags, fn: (session: Session) => Promise<T>): Promise<T> {
  const { Session } = await import('../../client/session.js');
  const session = await Session.open(ctx, flags.baseUrl);
  try {
    return await fn(session);
  } catch (e) {
    throw session.explain(e);
  } finally {
    await session.close();
  }
}

/** login, token, status, logout, decode: getting and keeping tokens (spec 4.2, 4.3, 5). */
export function clientCommands(ctx: ClientContext): Command[] {
  const out = (text: string) => void ctx.stdout.write(text);

  const login = new Command('login')
    .description('log in through the browser: discovery, registration, PKCE, consent, tokens stored for later commands')
    .addOption(baseUrlOption())
    .option(
      '--scope <scopes>',
      `space- or comma-separated scopes to ask for (${SUPPORTED_SCOPES.join(', ')})`,
      (value: string) => {
        try {
          return checkRequestedScopes(value);
        } catch (e) {
          throw new InvalidArgumentError((e as Error).message);
        }
      },
      'ask',
    )
    .option('--identity', 'leave out `resource`: an identity token, which workspace tools refuse (spec 4.2)')
    .option('--no-browser', 'print the URL instead of opening a browser (SSH sessions)')
    .option(
      '--headless',
      'no browser at all: request the consent URL over HTTP and follow its redirect; ' +
        'only a consent policy can answer it (agent-access serve --consent approve, for CI)',
    )
    .option(
      '--timeout <duration>',
      'give up waiting for the browser after this long (e.g. 5m; a bare number is seconds)',
      secondsFlag({ min: 1 }),
      300,
    )
    .option(
      '--callback-port <port>',
      'port of the loopback redirect listener on 127.0.0.1 (0: a free one; fix it to forward it over SSH)',
      port,
      0,
    )
    .option('--json', 'print the result as JSON')
    .action(
      async (
        flags: CommonFlags & {
          scope: string;
          identity?: boolean;
          browser: boolean;
          headless?: boolean;
          timeout: number;
          callbackPort: number;
        },
      ) => {
        const { login: runLogin } = await import('../../client/login.js');
        const browser = flags.headless ? 'none' : flags.browser ? 'open' : 'print';
        const result = await withSession(ctx, flags, (session) =>
          runLogin(session, {
            scope: flags.scope,
            identity: flags.identity === true,
            browser,
            timeoutMs: flags.timeout * 1_000,
            callbackPort: flags.callbackPort,
          }),
        );
        if (flags.json) return out(jsonText(result));
        out(
          `Logged in to ${result.base_url}${result.subject ? ` as ${result.subject}` : ''} ` +
            `(client ${result.client_id}${result.client_registered ? ', newly registered' : ''}).\n` +
            `Scopes: ${result.scope || '(none)'}; ${result.resource ? `audience ${result.resource}` : 'identity token (no resource)'}; ` +
            `access token valid until ${result.expires_at}.\n` +
            (result.replaced_login?.revoked ? `Replaced the previous login to ${result.base_url}: ${result.replaced_login.note}.\n` : ''),
        );
      },
    );

  const token = new Command('token')
    .description('print a valid access token for scripts, refreshing it (with rotation) when it is close to expiry')
    .addOption(baseUrlOption())
    .option(
      '--min-ttl <duration>',
      'refresh unless the token stays valid at least this long (e.g. 2m; a bare number is seconds)',
      secondsFlag({ min: 0 }),
      60,
    )
    .option('--refresh', 'refresh now, whatever the expiry: also proves at the server that the grant and its token family are alive')
    .option('--json', 'print the token with its expiry and scope as JSON')
    .action(async (flags: CommonFlags & { minTtl: number; refresh?: boolean }) => {
      const login = await withSession(ctx, flags, (session) =>
        session.accessToken({ minTtlMs: flags.minTtl * 1_000, force: flags.refresh === true }),
      );
      if (!flags.json) return out(`${login.access_token}\n`);
      out(
        jsonText({
          access_token: login.access_token,
          token_type: 'Bearer',
          expires_at: new Date(login.expires_at).toISOString(),
          expires_in: Math.max(0, Math.floor((login.expires_at - ctx.clock.now()) / 1_000)),
          scope: login.scope,
        }),
      );
    });

  const status = new Command('status')
    .description('who is logged in where: server, subject, scopes, audience, expiry, refresh age (exit 4 when not logged in)')
    .addOption(baseUrlOption())
    .option('--json', 'print JSON')
    .action(async (flags: CommonFlags) => {
      const { describeLogin, tokenClaims } = await import('../../client/login-view.js');
      await withSession(ctx, flags, async (session) => {
        const record = await session.store.read(session.baseUrl);
        const login = record.login;
        const now = ctx.clock.now();
        if (!login) {
          if (flags.json) out(jsonText({ base_url: session.baseUrl, logged_in: false }));
          throw new CliError(`not logged in to ${session.baseUrl}; run \`agent-access login\``, EXIT.authRequired, 'login_required');
        }
        const view = describeLogin(session.baseUrl, record.issuer ?? session.baseUrl, login, false);
        const expiresIn = Math.floor((login.expires_at - now) / 1_000);
        const claims = tokenClaims(login.access_token);
        if (flags.json) {
          const { client_registered: _ignored, ...rest } = view;
          return out(
            jsonText({
              logged_in: true,
              source: session.source,
              ...rest,
              expires_in: expiresIn,
              expired: expiresIn <= 0,
              refresh_token_obtained_at: login.refresh_obtained_at ? new Date(login.refresh_obtained_at).toISOString() : null,
              refresh_token_age: login.refresh_obtained_at ? Math.floor((now - login.refresh_obtained_at) / 1_000) : null,
              refreshes: login.refresh_count,
              logged_in_at: new Date(login.logged_in_at).toISOString(),
              token_store: session.store.fileFor(session.baseUrl),
            }),
          );
        }
        const rows: Array<[string, string]> = [
          ['server', `${session.baseUrl} (${sourceLabel[session.source]})`],
          ['issuer', view.issuer],
          ['subject', view.subject ?? '(opaque token)'],
          [
            'client',
            `${view.client_id}${typeof claims?.client_id === 'string' && claims.client_id !== view.client_id ? ` (token says ${claims.client_id})` : ''}`,
          ],
          ['scopes', view.scope || '(none)'],
          ['audience', Array.isArray(view.audience) ? view.audience.join(' ') : (view.audience ?? '(none: identity token)')],
          [
            'access token',
            expiresIn > 0
              ? `valid until ${view.expires_at} (${relativeTime(login.expires_at - now)})`
              : `expired ${relativeTime(login.expires_at - now)}; the next \`token\` refreshes it`,
          ],
          [
            'refresh token',
            login.refresh_token
              ? `${age(now - (login.refresh_obtained_at ?? login.logged_in_at))} old, ` +
                `${login.refresh_count} refresh${login.refresh_count === 1 ? '' : 'es'} since login`
              : 'none',
          ],
          ['logged in', `${new Date(login.logged_in_at).toISOString()} (${age(now - login.logged_in_at)} ago)`],
          ['token store', session.store.fileFor(session.baseUrl)],
        ];
        const width = Math.max(...rows.map(([k]) => k.length));
        out(rows.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join('\n') + '\n');
      });
    });

  const logout = new Command('logout')
    .description('revoke the login at the server (RFC 7009) when it can, and forget its tokens here')
    .addOption(baseUrlOption())
    .option('--json', 'print JSON')
    .action(async (flags: CommonFlags) => {
      const { revokeToken } = await import('../../client/oauth.js');
      const result = await withSession(ctx, flags, (session) =>
        session.store.update(session.baseUrl, async (record) => {
          const login = record.login;
          if (!login) return { result: { base_url: session.baseUrl, was_logged_in: false, revoked: false, note: 'not logged in' } };
          let revoked = false;
          let note: string;
          try {
            const { as } = await session.discover();
            const token = login.refresh_token ?? login.access_token;
            revoked = await revokeToken(session.http, as, {
              clientId: login.client_id,
              token,
              hint: login.refresh_token ? 'refresh_token' : 'access_token',
            });
            note = revoked ? 'revoked at the server' : 'the server offers no revocation endpoint; revoke the grant in its settings page';
          } catch (e) {
            note = `could not revoke at the server (${(e as Error).message}); revoke the grant in its settings page`;
          }
          return { record: { ...record, login: null }, result: { base_url: session.baseUrl, was_logged_in: true, revoked, note } };
        }),
      );
      if (flags.json) return out(jsonText(result));
      if (!result.was_logged_in) return out(`Not logged in to ${result.base_url}; nothing to do.\n`);
      out(`Logged out of ${result.base_url}: tokens forgotten here; ${result.note}.\n`);
      if (!result.revoked) ctx.stderr.write(`agent-access: warning: ${result.note}\n`);
    });

  const decode = new Command('decode')
    .description("show a token's header and claims (default: the stored access token; - reads stdin). Does not verify the signature")
    .argument('[token]', 'a JWT, or - for stdin')
    .addOption(baseUrlOption())
    .option('--json', 'print {header, claims} as JSON')
    .action(async (given: string | undefined, flags: CommonFlags) => {
      // The decode-only entry points: jose's index would load its crypto as well.
      const [{ decodeJwt }, { decodeProtectedHeader }] = await Promise.all([
        import('jose/jwt/decode'),
        import('jose/decode/protected_header'),
      ]);
      let token = given;
      if (token === '-') token = (await readStdin()).trim();
      if (!token) token = (await withSession(ctx, flags, (session) => session.login())).access_token;
      let header: Record<string, unknown>;
      let claims: Record<string, unknown>;
      try {
        header = decodeProtectedHeader(token);
        claims = decodeJwt(token);
      } catch (e) {
        throw new CliError(`not a JWT: ${(e as Error).message} (opaque tokens cannot be decoded)`, EXIT.failure, 'token_not_jwt');
      }
      if (flags.json) return out(jsonText({ header, claims }));
      const now = ctx.clock.now();
      const when = (key: string) =>
        typeof claims[key] === 'number'
          ? `  # ${new Date(claims[key] * 1_000).toISOString()}, ${relativeTime(claims[key] * 1_000 - now)}`
          : '';
      const lines = Object.entries(claims).map(
        ([k, v]) => `  ${k}: ${JSON.stringify(v)}${['iat', 'exp', 'nbf', 'auth_time'].includes(k) ? when(k) : ''}`,
      );
      out(
        `header:\n${Object.entries(header)
          .map(([k, v]) => `  ${k}: ${JSON.stringify(v)}`)
          .join('\n')}\nclaims:\n${lines.join('\n')}\n`,
      );
    });

  return [login, token, status, logout, decode];
}

const sourceLabel = {
  flag: '--base-url',
  env: '$AGENT_ACCESS_BASE_URL',
  emulator: 'the emulator running here',
  'last-login': 'the last login',
} as const;

async function readStdin(): Promise<string> {
  let text = '';
  for await (const chunk of process.stdin) text += chunk;
  return text;
}
