import type { FastifyInstance, FastifyReply, FastifyRequest, preHandlerAsyncHookHandler } from 'fastify';
import type { Allowlist } from '../core/allowlist.js';
import type { Core } from '../core/core.js';
import { ProblemError } from '../core/errors.js';
import { parseIdempotencyKey } from '../core/idempotency.js';
import { RateLimitedError, type RateLimitState } from '../core/rate-limit.js';
import { requireScope } from './resource-guard.js';
import { askSchema } from './schemas.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The body exactly as sent: idempotency compares these bytes. */
    rawBody?: string;
  }
}

export function setRateLimitHeaders(reply: FastifyReply, state: RateLimitState): void {
  reply.header('ratelimit-limit', state.limit).header('ratelimit-remaining', state.remaining).header('ratelimit-reset', state.reset);
}

/** Spec 4.4: the REST allowlist on `{base_url}`. Every route: bearer token with its scope, then the grant's rate limit. */
export function registerRestRoutes(app: FastifyInstance, core: Core, allowlist: Allowlist): void {
  app.register(async (rest) => {
    rest.removeContentTypeParser('application/json');
    rest.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
      request.rawBody = body as string;
      try {
        done(null, JSON.parse(body as string));
      } catch {
        done(new ProblemError(400, 'invalid_json', 'the request body is not valid JSON'), undefined);
      }
    });

    const guarded = (scope: string, route: string): preHandlerAsyncHookHandler[] => [
      requireScope(core, scope),
      async function rateLimit(request: FastifyRequest, reply: FastifyReply) {
        try {
          setRateLimitHeaders(reply, allowlist.rateLimit(request.access!));
        } catch (e) {
          if (e instanceof RateLimitedError) core.events.emit('rate_limit.exceeded', { client_id: request.access!.client_id, grant_id: request.access!.grant.id, route });
          throw e;
        }
      },
    ];

    // Spec 2.4, 4.4 rules 1, 2, 5.
    rest.post('/chat/ask', { schema: askSchema, preHandler: guarded('ask', 'POST /chat/ask') }, async (request, reply) => {
      const key = parseIdempotencyKey(request.headers['idempotency-key']);
      const { question } = request.body as { question: string };
      if (question.trim() === '') throw new ProblemError(400, 'invalid_request', 'question must not be empty');
      const { response } = await allowlist.idempotent(request.access!, 'POST /chat/ask', key, request.rawBody ?? '', () => allowlist.ask(question));
      return reply.code(response.status).type(response.content_type).send(response.body);
    });
  });
}
