import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify';
import type { Prices } from '../core/state/charges.js';
import type { Core } from '../core/core.js';
import type { Faults } from '../core/emulation/faults.js';
import { resourceMetadataUrl } from '../core/oauth/metadata.js';
import type { ResourceService } from '../core/resources/resource-service.js';
import { VARIANT_HEADER } from '../core/resources/variants.js';
import type { Workspace } from '../core/resources/workspace.js';
import type { AgentPlane } from '../core/resources/agent-plane.js';
import { ADMIN_EVENTS_PATH } from '../protocol/admin-api.js';
import type { BrowserSessions } from './browser-session.js';
import { errorReplier, sendProblem } from './error-replies.js';
import { installFaultHooks } from './fault-hooks.js';
import { isAllowedHost } from './host-guard.js';
import { HTTP_LIMITS, answerClientError, checkRequestHead, closeUnreadRequest } from './http-transport.js';
import { answerMethodNotAllowed, trackRoutes } from './known-routes.js';
import { installObserver, type RequestObserver } from './observer.js';
import type { Snapshots } from './snapshots.js';
import { errorPage } from './views.js';
import type { WarmUpRequests } from './warm-up-request.js';

/**
 * What the two apps (api-app.ts: `{base_url}`, auth-app.ts: `{auth_url}`) share: their options, the fastify instance
 * they are built on, the hooks every request of either goes through, and their 404.
 */

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
    /** Its number in the order requests arrived in (core/emulation/arrivals.ts), given as its head was received. */
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
