import cookie from '@fastify/cookie';
import cors from '@fastify/cors';
import formbody from '@fastify/formbody';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { OAuthError } from '../core/state/errors.js';
import type { Core } from '../core/core.js';
import {
  PROTECTED_RESOURCE_METADATA_PATH,
  authorizationServerMetadata,
  protectedResourceMetadata,
  AS_METADATA_PATH,
} from '../core/oauth/metadata.js';
import { publicJwks } from '../core/oauth/keys.js';
import { registerClient } from '../core/oauth/registration.js';
import { exchangeToken } from '../core/oauth/token-endpoint.js';
import { revokeToken } from '../core/oauth/revocation.js';
import type { TokenParams } from '../core/oauth/grants/index.js';
import { ADMIN_PREFIX } from '../protocol/admin-api.js';
import { registerAdminRoutes } from './admin-routes.js';
import { installCommonHooks, newFastify, notFound, type AppOptions } from './app-common.js';
import { sendProblem } from './error-replies.js';
import { requireScope } from './resource-guard.js';
import { registerRestRoutes } from './rest-routes.js';
import { registerRetiredRoutes } from './retired-routes.js';
import { registerMcpRoute } from './mcp.js';
import { registerSchema, revokeSchema, tokenSchema } from './schemas.js';
import { useStrictJson } from './strict-json.js';

const NO_STORE = { 'cache-control': 'no-store', pragma: 'no-cache' };

/** Each OAuth endpoint takes one media type (RFC 6749 §3.2 form encoding; RFC 7591 §3.1 JSON). */
function requireMediaType(type: 'application/x-www-form-urlencoded' | 'application/json', style: 'oauth' | 'registration') {
  return async (request: FastifyRequest) => {
    const actual = (request.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
    if (actual !== type)
      throw new OAuthError(style === 'oauth' ? 'invalid_request' : 'invalid_client_metadata', `Content-Type must be ${type}`);
  };
}
const formOnly = requireMediaType('application/x-www-form-urlencoded', 'oauth');

/**
 * The auth-scheme of credentials (RFC 9110 §11.4: a token, then whitespace or the end), of any length the header limit
 * lets through. A header that does not begin with one names no scheme and is answered in the Basic scheme of RFC 6749
 * §2.3.1, the one client authentication defines.
 */
const AUTH_SCHEME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+(?=[ \t]|$)/;

/**
 * RFC 6749 §5.2, RFC 7009 §2.1: clients are public (spec 2.1, 5.1: token_endpoint_auth_method "none" only), so
 * client authentication in the Authorization header always fails: 401 invalid_client with a challenge in the
 * scheme the client used. Runs before the body is read, so nothing is consumed or rotated.
 */
function refuseClientAuthentication(core: Core) {
  // Callback style: it runs on every token request, and an async hook costs a promise each.
  return (request: FastifyRequest, _reply: FastifyReply, done: (error?: Error) => void) => {
    const authorization = request.headers.authorization;
    if (authorization === undefined) return done();
    const sent = AUTH_SCHEME.exec(authorization)?.[0];
    const scheme = sent ?? 'Basic';
    done(
      new OAuthError(
        'invalid_client',
        `client authentication (${sent ? `${sent} in the Authorization header` : 'an Authorization header that names no scheme'}) is ` +
          `not supported: clients are public; send client_id in the form body and no Authorization header (token_endpoint_auth_method 'none')`,
        { status: 401, challenge: `${scheme} realm="${core.issuer}"` },
      ),
    );
  };
}

/** `{base_url}`: OAuth endpoints for clients, metadata, and (in later parts) the REST allowlist and /mcp. */
export async function buildApiApp(
  core: Core,
  options: AppOptions,
  extend?: (app: FastifyInstance) => void | Promise<void>,
): Promise<FastifyInstance> {
  const app = newFastify(options);
  useStrictJson(app);
  installCommonHooks(app, core, 'api', options);
  await app.register(formbody);
  // Browser-based MCP clients call metadata, registration, token, revocation (and later /mcp and REST) cross-origin.
  // CORS is registered once in this context; the admin API lives beside it and never answers CORS.
  await app.register(async (open) => {
    await open.register(cors, {
      origin: '*',
      methods: ['GET', 'POST', 'DELETE', 'OPTIONS'],
      allowedHeaders: ['Authorization', 'Content-Type', 'MCP-Protocol-Version', 'Mcp-Session-Id', 'Idempotency-Key', 'Last-Event-ID'],
      exposedHeaders: ['WWW-Authenticate', 'Mcp-Session-Id', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'Retry-After'],
      maxAge: 600,
    });
    // Set here, its 404s run the CORS hook: browser clients probing discovery paths see "not found", not a network
    // error. Fastify allows one 404 handler per prefix, so this one serves every path of the origin without its own.
    open.setNotFoundHandler(notFound);
    registerOAuthRoutes(open, core);
    if (options.resources) registerRestRoutes(open, core, options.resources);
    // The agent plane (spec 4.5): MCP clients begin discovery with the 401 challenge here (RFC 9728 §5, MCP authorization).
    if (options.resources && options.plane) registerMcpRoute(open, core, options.resources, options.plane, options.onServerError);
    else
      open.all('/mcp', { onRequest: requireScope(core, null, 'ask') }, async (_request, reply) =>
        sendProblem(reply, 'agent_plane_disabled', 'this server runs without the agent plane'),
      );
    await extend?.(open);
  });
  const { sessions, workspace } = options;
  if (sessions && workspace) {
    // Only the retired per-kind routes read the browser session cookie set on {auth_url}: no other request of this
    // origin parses cookies.
    await app.register(async (browser) => {
      await browser.register(cookie);
      registerRetiredRoutes(browser, sessions, workspace, () => core.urls.authUrl);
    });
  }
  if (options.adminToken) {
    registerAdminRoutes(app, core, {
      adminToken: options.adminToken,
      port: options.port,
      plane: options.plane,
      resources: options.resources,
      faults: options.faults,
      snapshots: options.snapshots,
    });
    // Unknown admin paths get the 404 of the admin prefix, outside the CORS context: the admin API never answers CORS.
    await app.register(async (admin) => admin.setNotFoundHandler(notFound), { prefix: ADMIN_PREFIX });
  }
  return app;
}

/** Metadata, JWKS, registration, token and revocation (spec 4.1, 4.3; RFC 8414, 9728, 7591, 7009). */
function registerOAuthRoutes(app: FastifyInstance, core: Core): void {
  // The metadata routes take no input and answer the core's objects as they are: no schema, so the first
  // discovery request (a client's first call, and what readiness probes poll) compiles nothing.
  app.get(AS_METADATA_PATH, async () => authorizationServerMetadata(core.urls));
  // RFC 9728 §3.1 path for the /mcp resource, and the root path clients fall back to; the resource is named as the
  // client reached it (127.0.0.1, localhost or [::1]), which it compares with the URL it was given (§3.3).
  app.get(PROTECTED_RESOURCE_METADATA_PATH, async (request) => protectedResourceMetadata(core.urls, request.headers.host));
  app.get('/.well-known/oauth-protected-resource', async (request) => protectedResourceMetadata(core.urls, request.headers.host));
  app.get('/.well-known/jwks.json', async (_request, reply) => {
    reply.type('application/jwk-set+json');
    return publicJwks(core.state.keys);
  });

  app.post(
    '/oauth/register',
    {
      schema: registerSchema,
      config: { errorStyle: 'registration' },
      // The rate per source address is taken before the body is read: a flood costs no parsing.
      onRequest: (request, _reply, done) => {
        try {
          core.registrations.admit(request.ip);
          done();
        } catch (e) {
          done(e as Error);
        }
      },
      preValidation: requireMediaType('application/json', 'registration'),
    },
    async (request, reply) => {
      const client = await registerClient(core, request.body as Record<string, unknown>);
      return reply.code(201).headers(NO_STORE).send(client);
    },
  );

  // What the token and revocation endpoints share: RFC 6749 errors, form bodies, public clients only.
  const clientEndpoint = { config: { errorStyle: 'oauth' as const }, onRequest: refuseClientAuthentication(core), preValidation: formOnly };

  app.post('/oauth/token', { schema: tokenSchema, ...clientEndpoint }, async (request, reply) => {
    const tokens = await exchangeToken(core, request.body as TokenParams);
    return reply.headers(NO_STORE).send(tokens);
  });

  app.post('/oauth/revoke', { schema: revokeSchema, ...clientEndpoint }, async (request, reply) => {
    await revokeToken(core, request.body as TokenParams);
    return reply.headers(NO_STORE).code(200).send();
  });
}
