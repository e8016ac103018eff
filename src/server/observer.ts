import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Core } from '../core/core.js';
import { ADMIN_PREFIX } from '../protocol/admin-api.js';
import type { WarmUpRequests } from './warm-up-request.js';

/** A request as it reached a server: what a grader of clients needs and the events do not carry (query, headers, body). */
export interface ObservedRequest {
  /** Its number in the order requests arrived in: `request.admitted` and `rate_limit.exceeded` carry the same. */
  arrival: number;
  server: 'api' | 'auth';
  method: string;
  /** Path and query as sent. */
  url: string;
  /** The route template as registered (`/research/:job_id`), or null for a path that is no route. */
  route: string | null;
  authorization: string | undefined;
  idempotencyKey: string | undefined;
  /** Real time (epoch ms) its head arrived: a client's waits are real, whatever the emulator's clock says. */
  startedAt: number;
  /** The emulator's clock then. */
  clockAt: number;
}

/** A request and its answer. */
export interface ObservedExchange extends ObservedRequest {
  /** The body as parsed (JSON, form), and the exact text of a REST JSON body. */
  body: unknown;
  rawBody: string | undefined;
  status: number;
  /** The answer's text, when it was text of at most 64 KiB. */
  response: string | undefined;
  /**
   * Real time its answer began to go out (0 when none did): a client cannot have it earlier. `endedAt`, once the socket
   * took it all, can be later than the client saw it when this process is busy.
   */
  sentAt: number;
  endedAt: number;
}

/**
 * Sees every request of the service (not the admin API's, not the emulator's own warm-up): `conformance client`
 * judges a client from it and the events. Only an emulator started with one pays for it.
 */
export interface RequestObserver {
  started?(request: ObservedRequest): void;
  ended(exchange: ObservedExchange): void;
}

const RESPONSE_LIMIT = 64 * 1024;

declare module 'fastify' {
  interface FastifyRequest {
    observed?: ObservedRequest;
    observedResponse?: string;
    observedSentAt?: number;
  }
}

/** Adds the observer's hooks; called after the hook that numbers arrivals. */
export function installObserver(
  app: FastifyInstance,
  core: Core,
  server: 'api' | 'auth',
  observer: RequestObserver,
  warmUp?: WarmUpRequests,
): void {
  const ignored = (request: FastifyRequest) => request.url.startsWith(ADMIN_PREFIX) || warmUp?.owns(request) === true;
  app.addHook('onRequest', (request, reply, done) => {
    if (ignored(request)) return done();
    const header = (name: string) => {
      const value = request.headers[name];
      return Array.isArray(value) ? value.join(', ') : value;
    };
    const observed: ObservedRequest = {
      arrival: request.arrival ?? 0,
      server,
      method: request.method,
      url: request.url,
      route: request.routeOptions.url ?? null,
      authorization: header('authorization'),
      idempotencyKey: header('idempotency-key'),
      startedAt: Date.now(),
      clockAt: core.clock.now(),
    };
    request.observed = observed;
    observer.started?.(observed);
    // 'close', not onResponse: an answer lost with its connection (a drop_response fault) is seen too, as status 0.
    reply.raw.once('close', () =>
      observer.ended({
        ...observed,
        body: request.body,
        rawBody: request.rawBody,
        status: reply.raw.writableFinished ? reply.statusCode : 0,
        response: request.observedResponse,
        sentAt: request.observedSentAt ?? 0,
        endedAt: Date.now(),
      }),
    );
    done();
  });
  app.addHook('onSend', (request, _reply, payload, done) => {
    if (request.observed) request.observedSentAt = Date.now();
    if (request.observed && (typeof payload === 'string' || Buffer.isBuffer(payload)) && payload.length <= RESPONSE_LIMIT)
      request.observedResponse = String(payload);
    done(null, payload);
  });
}
