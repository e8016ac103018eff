import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import type { Allowlist } from '../core/allowlist.js';
import type { Core } from '../core/core.js';
import { ProblemError } from '../core/errors.js';
import { parseIdempotencyKey } from '../core/idempotency.js';
import { RateLimitedError, type RateLimitState } from '../core/rate-limit.js';
import { requireScope } from './resource-guard.js';
import { askSchema, idParams, researchSchema, trainingSchema } from './schemas.js';

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
    rest.addContentTypeParser('application/json', { parseAs: 'string', bodyLimit: 2 * 1024 * 1024 }, (request, body, done) => {
      request.rawBody = body as string;
      try {
        done(null, JSON.parse(body as string));
      } catch {
        done(new ProblemError(400, 'invalid_json', 'the request body is not valid JSON'), undefined);
      }
    });

    // onRequest: refused before the body is read or validated, so a request without a token always gets the
    // 401 challenge (spec 5.5, 7), and only JSON bodies are taken, so idempotency fingerprints the exact bytes.
    const guarded = (scope: string, route: string): onRequestAsyncHookHandler[] => [
      requireScope(core, scope),
      async function rateLimit(request: FastifyRequest, reply: FastifyReply) {
        try {
          setRateLimitHeaders(reply, allowlist.rateLimit(request.access!));
        } catch (e) {
          if (e instanceof RateLimitedError) core.events.emit('rate_limit.exceeded', { client_id: request.access!.client_id, grant_id: request.access!.grant.id, route });
          throw e;
        }
      },
      async function jsonOnly(request: FastifyRequest) {
        if (request.method !== 'POST') return;
        const type = (request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
        if (type !== 'application/json') throw new ProblemError(415, 'unsupported_media_type', 'send the body as application/json');
      },
    ];

    // Spec 2.5, 3.1, 4.4 rules 3, 5: answers at once with 202; polling is free.
    rest.post('/research', { schema: researchSchema, onRequest: guarded('research', 'POST /research') }, async (request, reply) => {
      const key = parseIdempotencyKey(request.headers['idempotency-key']);
      const { question } = request.body as { question: string };
      if (question.trim() === '') throw new ProblemError(400, 'invalid_request', 'question must not be empty');
      const { response } = await allowlist.idempotent(request.access!, 'POST /research', key, request.rawBody ?? '', () => allowlist.startResearch(request.access!, question));
      return reply.code(response.status).type(response.content_type).send(response.body);
    });
    rest.get('/research/:job_id', { schema: idParams('job_id'), onRequest: guarded('research', 'GET /research/{job_id}') }, async (request) =>
      allowlist.researchView(request.access!, (request.params as { job_id: string }).job_id),
    );

    // Spec 2.6, 4.4 rules 4, 5: accepted, not yet indexed.
    rest.post('/training', { schema: trainingSchema, onRequest: guarded('training.write', 'POST /training') }, async (request, reply) => {
      const key = parseIdempotencyKey(request.headers['idempotency-key']);
      const { file_name, content } = request.body as { file_name: string; content: string };
      const { response } = await allowlist.idempotent(request.access!, 'POST /training', key, request.rawBody ?? '', () => allowlist.startTraining(request.access!, file_name, content));
      return reply.code(response.status).type(response.content_type).send(response.body);
    });
    rest.get('/training/:document_id', { schema: idParams('document_id'), onRequest: guarded('training.write', 'GET /training/{document_id}') }, async (request) =>
      allowlist.trainingView(request.access!, (request.params as { document_id: string }).document_id),
    );
    rest.get('/training/:document_id/url', { schema: idParams('document_id'), onRequest: guarded('training.write', 'GET /training/{document_id}/url') }, async (request) =>
      allowlist.trainingUrl(request.access!, (request.params as { document_id: string }).document_id),
    );

    // Spec 2.4, 4.4 rules 1, 2, 5.
    rest.post('/chat/ask', { schema: askSchema, onRequest: guarded('ask', 'POST /chat/ask') }, async (request, reply) => {
      const key = parseIdempotencyKey(request.headers['idempotency-key']);
      const { question } = request.body as { question: string };
      if (question.trim() === '') throw new ProblemError(400, 'invalid_request', 'question must not be empty');
      const { response } = await allowlist.idempotent(request.access!, 'POST /chat/ask', key, request.rawBody ?? '', () => allowlist.ask(request.access!, question));
      return reply.code(response.status).type(response.content_type).send(response.body);
    });
  });
}
