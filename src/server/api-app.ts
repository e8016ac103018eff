import cookie from '@fastify/cookie';
import cors from '@fastify/cors';
import formbody from '@fastify/formbody';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify';
import { OAuthError } from '../core/errors.js';
import type { Prices } from '../core/charges.js';
import type { Core } from '../core/core.js';
import {
  PROTECTED_RESOURCE_METADATA_PATH,
  authorizationServerMetadata,
  protectedResourceMetadata,
  resourceMetadataUrl,
  AS_METADATA_PATH,
} from '../core/metadata.js';
import { publicJwks } from '../core/keys.js';
import { registerClient } from '../core/registration.js';
import { exchangeToken } from '../core/token-endpoint.js';
import { revokeToken } from '../core/revocation.js';
import type { TokenParams } from '../core/grants/index.js';
import { ADMIN_EVENTS_PATH, ADMIN_PREFIX } from '../protocol/admin-api.js';
import { registerAdminRoutes } from './admin-routes.js';
import { errorReplier, sendOAuthError, sendProblem } from './error-replies.js';
import type { Fault, Faults } from '../core/faults.js';
import { pageHeaders } from './page-headers.js';
import { isAllowedHost } from './host-guard.js';
import { HTTP_LIMITS, answerClientError, checkRequestHead, closeUnreadRequest } from './http-transport.js';
import { answerMethodNotAllowed, trackRoutes } from './known-routes.js';
import { requireScope } from './resource-guard.js';
import { registerRestRoutes } from './rest-routes.js';
import { registerRetiredRoutes } from './retired-routes.js';
import type { BrowserSessions } from './browser-session.js';
import type { Workspace } from '../core/workspace.js';
import type { AgentPlane } from '../core/agent-plane.js';
import { registerMcpRoute } from './mcp.js';
import type { ResourceService } from '../core/resource-service.js';
import { registerSchema, revokeSchema, tokenSchema } from './schemas.js';
import { VARIANT_HEADER } from '../core/variation.js';
import type { WarmUpRequests } from './warm-up-request.js';
import { installObserver, type RequestObserver } from './observer.js';
import { useStrictJson } from './strict-json.js';
import { errorPage } from './views.js';
import type { Snapshots } from './snapshots.js';

export interface AppOptions {
  /** Host-header check against loopback names (on when bound to loopback). */
  checkHost: boolean;
  /** The interface the server is bound to: its name is an allowed Host too. */
  bindHost?: string;
  /** Receives the errors behind 500 answers, whose details the client never sees. */
  onServerError?: (error: Error) => void;
  /** Known once listening; until then requests get 503. */
  port: () => number | undefined;
  adminToken?: string;
  bodyLimit?: number;
  /** True once stop() began: responses then close their connection so shutdown does not wait for keep-alive. */
  stopping?: () => boolean;
  /** Documents a person may open on `{auth_url}` (knowledge base and own training documents). */
  documents?: (personId: string, id: string) => { title: string; file_name: string; content: string } | undefined;
  /** Browser sessions shared by both origins (cookies ignore ports). */
  sessions?: BrowserSessions;
  /** The person's workspace, for the retired per-kind routes. */
  workspace?: Workspace;
  /** The resource server behind the REST allowlist (spec 4.4); without it the API serves the authorization server alone. */
  resources?: ResourceService;
  /** What charged calls cost (the resource server's prices): the consent page says it. */
  prices?: Prices;
  /** The agent plane's write actions: with it, `/mcp` serves the MCP tools (spec 4.5). */
  plane?: AgentPlane;
  /** Snapshots of the whole state, for the admin API. */
  snapshots?: Snapshots;
  /** Where the route schemas' validators and serializers come from (the emulator's: precompiled by the build). */
  schemaController?: FastifyServerOptions['schemaController'];
  /** Faults on purpose (emulator control): 5xx, latency, and grant faults due on the clock. */
  faults?: Faults;
  /** The emulator's own warm-up requests: served as any, but logged nowhere and never a fault's. */
  warmUp?: WarmUpRequests;
  /** Sees every request of the service (`conformance client`). */
  observer?: RequestObserver;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Injected faults that shaped this request before any route ran (5xx, latency), for the request log. */
    faults?: string[];
    /** Its number in the order requests arrived in (core/arrivals.ts), given as its head was received. */
    arrival?: number;
  }
  interface FastifyInstance {
    /**
     * A drop_response fault (emulator control): closes the connection before any byte of the answer is written, so
     * the client sees it reset, and logs the request as served (no response finishes, so onResponse never runs).
     */
    loseAnswer(request: FastifyRequest, reply: FastifyReply): void;
  }
}

/** An injected 5xx in the route's own error style: RFC 6749 JSON on OAuth endpoints, a page on pages, else a problem. */
function sendInjectedError(request: FastifyRequest, reply: FastifyReply, fault: Fault) {
  const status = fault.status ?? 500;
  const detail = `the service failed (${fault.id}, an injected ${status})`;
  if (status === 503) reply.header('retry-after', 1);
  const style = request.routeOptions.config?.errorStyle ?? 'problem';
  if (style === 'oauth' || style === 'registration')
    return sendOAuthError(reply, new OAuthError(status === 503 ? 'temporarily_unavailable' : 'server_error', detail, { status }));
  if (style === 'html') return pageHeaders(reply.code(status)).send(errorPage('Der Dienst ist gestört', 'server_error', detail));
  return sendProblem(reply, 'server_error', detail, {}, status);
}

/** The tool an MCP `tools/call` request names (its body is parsed by now), for faults armed on one tool. */
function toolCalled(request: FastifyRequest): string | undefined {
  if (request.routeOptions.url !== '/mcp' || request.method !== 'POST') return undefined;
  const message = request.body as { method?: unknown; params?: { name?: unknown } } | null | undefined;
  return message?.method === 'tools/call' && typeof message.params?.name === 'string' ? message.params.name : undefined;
}

/**
 * Faults on the HTTP side: grant faults whose moment has come fire before the request is looked at (a revocation
 * "at 12:00" refuses a request at 12:00 even between ticks); 5xx and latency faults once the route, and the
 * caller's token, are known.
 */
function installFaultHooks(app: FastifyInstance, core: Core, faults: Faults, warmUp?: WarmUpRequests): void {
  // Admin calls, paths that are no route (a browser's /favicon.ico) and the emulator's own never use up a fault.
  const exempt = (request: FastifyRequest) =>
    request.url.startsWith(ADMIN_PREFIX) || request.routeOptions.url === undefined || warmUp?.owns(request) === true;
  app.addHook('onRequest', (request, _reply, done) => {
    const due = faults.nextDue;
    if (due === null || due > core.clock.now() || exempt(request)) return done();
    faults.runDue().then((fired) => {
      // The request the revocation (or replay) now refuses shows it in the log.
      if (fired.length > 0) (request.faults ??= []).push(...fired.map((f) => `${f.id} ${f.kind}`));
      done();
    }, done);
  });
  app.addHook('preHandler', (request, reply, done) => {
    if (!faults.armed || exempt(request)) return done();
    const body = request.body as { client_id?: unknown } | undefined;
    const query = request.query as { client_id?: unknown } | undefined;
    const clientId = request.access?.client_id ?? [body?.client_id, query?.client_id].find((v): v is string => typeof v === 'string');
    const ctx = {
      method: request.method,
      route: request.routeOptions.url,
      path: request.url.split('?')[0],
      tool: toolCalled(request),
      client_id: clientId,
      grant_id: request.access?.grant.id,
    };
    const note = (fault: Fault) => (request.faults ??= []).push(`${fault.id} ${fault.kind}`);
    const failure = faults.take('server_error', ctx);
    if (failure) {
      note(failure);
      return void sendInjectedError(request, reply, failure);
    }
    const slow = faults.take('latency', ctx);
    if (!slow) return done();
    note(slow);
    setTimeout(done, slow.ms ?? 0);
  });
}

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

/** Hooks shared by both servers: readiness, Host check, the request log event, the error handler. */
export function installCommonHooks(app: FastifyInstance, core: Core, server: 'api' | 'auth', options: AppOptions): void {
  // Callback-style hooks: they run on every request, and async ones cost a promise each.
  app.addHook('onRequest', (request, reply, done) => {
    // First of all: a retry is judged by when the request arrived, not by when it was admitted (findings.ts).
    request.arrival = core.arrivals.next();
    const port = options.port();
    if (port === undefined) return void sendProblem(reply, 'server_starting', 'the emulator is still starting');
    if (options.checkHost && !isAllowedHost(request.headers.host, port, options.bindHost)) {
      return void sendProblem(reply, 'host_not_allowed', `Host "${request.headers.host ?? ''}" is not served here; use 127.0.0.1:${port}`);
    }
    done(checkRequestHead(request));
  });
  if (options.observer) installObserver(app, core, server, options.observer, options.warmUp);
  app.addHook('onSend', (request, reply, payload, done) => {
    if (options.stopping?.()) reply.header('connection', 'close');
    closeUnreadRequest(request, reply);
    done(null, payload);
  });
  /** The request log (`request.served`), and the answered request counted for faults waiting on the grant. */
  const served = (request: FastifyRequest, reply: FastifyReply) => {
    // The dashboard's own stream and the emulator's warm-up are not requests to the service.
    if (core.events.active && !request.url.startsWith(ADMIN_EVENTS_PATH) && !options.warmUp?.owns(request)) {
      const faults = [...(request.faults ?? []), ...(request.access?.faults ?? [])];
      const variant = reply.getHeader(VARIANT_HEADER);
      core.events.emit('request.served', {
        server,
        method: request.method,
        path: request.url.split('?')[0] ?? request.url,
        status: reply.statusCode,
        ms: Math.round(reply.elapsedTime * 10) / 10,
        // A refused token is still someone's: the log says whose, as for an admitted one.
        ...(request.access ? { client_id: request.access.client_id, grant_id: request.access.grant.id } : (request.refusedToken ?? {})),
        ...(request.unreadToken ? { bearer: request.unreadToken } : {}),
        ...(faults.length > 0 ? { faults } : {}),
        ...(typeof variant === 'string' ? { variant } : {}),
      });
    }
    // A revocation or replay "after N requests" counts answered requests of the grant.
    if (request.access && options.faults?.armed)
      void options.faults.countRequest(request.access.grant.id).catch((e: Error) => options.onServerError?.(e));
  };
  app.decorate('loseAnswer', (request: FastifyRequest, reply: FastifyReply) => {
    reply.hijack();
    request.raw.socket?.destroy();
    served(request, reply);
  });
  app.addHook('onResponse', (request, reply, done) => {
    served(request, reply);
    done();
  });
  if (options.faults) installFaultHooks(app, core, options.faults, options.warmUp);
  app.setErrorHandler(
    errorReplier({
      resourceMetadataUrl: (request) => resourceMetadataUrl(core.urls, request.headers.host),
      htmlError: (_status, error, description, hint, request) =>
        errorPage('Anfrage kann nicht bearbeitet werden', error, description, hint, request.routeOptions.url === '/oauth/authorize'),
      onServerError: options.onServerError,
    }),
  );
}

/** The 404 of both servers; each sets it in the context whose hooks its 404s need (the API's: CORS). */
export const notFound = (request: FastifyRequest, reply: FastifyReply) =>
  answerMethodNotAllowed(request, reply) ??
  sendProblem(reply, 'route_not_found', `${request.method} ${request.url.split('?')[0]} is not a route of this service`);

export function newFastify(options: AppOptions): FastifyInstance {
  const app = Fastify({
    logger: false,
    bodyLimit: options.bodyLimit ?? 1024 * 1024,
    // Strict input: no coercion of numbers into strings or single values into arrays.
    ajv: { customOptions: { coerceTypes: false, allErrors: false } },
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    // Request line and headers up to HTTP_LIMITS.head reach the routes, which check the limits with their error shape;
    // what the parser refuses beyond it is answered as a problem, then the connection closes politely. A head must
    // arrive within headersTimeoutMs, its body within requestTimeoutMs, and an idle keep-alive connection is closed
    // after keepAliveMs: each gives its descriptor back (the connection bound is ConnectionBudget's, over every listener).
    http: {
      maxHeaderSize: HTTP_LIMITS.head,
      headersTimeout: HTTP_LIMITS.headersTimeoutMs,
      connectionsCheckingInterval: HTTP_LIMITS.timeoutCheckMs,
    },
    requestTimeout: HTTP_LIMITS.requestTimeoutMs,
    keepAliveTimeout: HTTP_LIMITS.keepAliveMs,
    clientErrorHandler: answerClientError,
    ...(options.schemaController ? { schemaController: options.schemaController } : {}),
    // Errors the router raises before any route runs (an over-long parameter, a broken URL) get the one error shape too.
    frameworkErrors: (error, _request, reply) => {
      const status = (error as { statusCode?: number }).statusCode ?? 400;
      void sendProblem(reply, 'invalid_request', error.message, {}, status >= 400 && status < 500 ? status : 400);
    },
  });
  // Before any route: the 404 handlers tell a wrong method on a known path (405) from an unknown path.
  trackRoutes(app);
  return app;
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
