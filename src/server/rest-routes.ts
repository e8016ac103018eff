import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import type { Core } from '../core/core.js';
import type { AccessContext } from '../core/oauth/resource-guard.js';
import { ProblemError } from '../core/state/errors.js';
import { parseIdempotencyKey } from '../core/state/idempotency.js';
import type { Answer, Charged } from '../core/resources/metering.js';
import type { RateLimitState } from '../core/state/rate-limit.js';
import type { ResourceService } from '../core/resources/resource-service.js';
import { VARIANT_HEADER } from '../core/resources/variants.js';
import { requireScope } from './resource-guard.js';
import { decodeUtf8 } from './strict-json.js';
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

/** How often a header occurs in a request as sent (`rawHeaders` alternates names and values). */
function headerCount(rawHeaders: readonly string[], name: string): number {
  let count = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i]!.toLowerCase() === name) count++;
  return count;
}

/** With --vary-unspecified, names what the body varied: emulator diagnostics, not part of the service (docs/emulator-control.md). */
function setVariantHeader(reply: FastifyReply, variant: string | undefined): void {
  if (variant) reply.header(VARIANT_HEADER, variant);
}

/**
 * A stored answer is the same frozen object on every replay (spec 4.4 rule 5: the same bytes again), so its JSON is
 * written once; the text goes when the idempotency record does.
 */
const storedTexts = new WeakMap<object, string>();
function storedJson(value: unknown): string {
  if (typeof value !== 'object' || value === null) return JSON.stringify(value);
  let text = storedTexts.get(value);
  if (text === undefined) storedTexts.set(value, (text = JSON.stringify(value)));
  return text;
}

/** Spec 4.4: the REST allowlist on `{base_url}`. Every route: bearer token with its scope, then the grant's rate limit. */
export function registerRestRoutes(app: FastifyInstance, core: Core, resources: ResourceService): void {
  app.register(async (rest) => {
    rest.removeContentTypeParser('application/json');
    rest.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit: 2 * 1024 * 1024 }, (request, body, done) => {
      const text = decodeUtf8(body as Buffer);
      if (text === null) return done(new ProblemError('invalid_json', 'the request body is not valid UTF-8 (RFC 8259 §8.1)'), undefined);
      request.rawBody = text;
      try {
        done(null, JSON.parse(text));
      } catch {
        done(new ProblemError('invalid_json', 'the request body is not valid JSON'), undefined);
      }
    });

    // onRequest: refused before the body is read or validated, so a request without a token always gets the
    // 401 challenge (spec 5.5, 7), and only JSON bodies are taken, so idempotency fingerprints the exact bytes.
    const guarded = (scope: string, route: string): onRequestAsyncHookHandler[] => [
      requireScope(core, scope),
      async function rateLimit(request: FastifyRequest, reply: FastifyReply) {
        const gate = { scope, route, path: request.url.split('?')[0], meter: route };
        setRateLimitHeaders(reply, resources.meter.admit(request.access!, gate));
      },
      async function postHeaders(request: FastifyRequest) {
        if (request.method !== 'POST') return;
        const type = (request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
        if (type !== 'application/json') throw new ProblemError('unsupported_media_type', 'send the body as application/json');
        // Node joins repeated headers into one value ("a, b"), which would pass as one key: refused instead.
        const keys = headerCount(request.raw.rawHeaders, 'idempotency-key');
        if (keys > 1)
          throw new ProblemError(
            'invalid_idempotency_key',
            `the request carries ${keys} Idempotency-Key headers; send exactly one`,
            'Set the Idempotency-Key header once per request (an HTTP library that appends headers on retry sends it twice).',
          );
      },
    ];

    /**
     * A POST of the allowlist: guarded, metered (idempotent, spec 4.4 rule 5), answered with `status`. A replay
     * renders the stored result the same way, so it gets the same status and the same bytes.
     */
    const meteredPost = (
      path: string,
      status: 200 | 202,
      scope: string,
      schema: object,
      operation: (access: AccessContext, body: Record<string, string>) => Promise<Charged<unknown>>,
    ) => {
      const route = `POST ${path}`;
      rest.post(path, { schema, onRequest: guarded(scope, route) }, async (request, reply) => {
        const key = parseIdempotencyKey(request.headers['idempotency-key']);
        const body = request.body as Record<string, string>;
        const answer = await resources.meter.run(request.access!, { meter: route, key, body: request.rawBody ?? '' }, () =>
          operation(request.access!, body),
        );
        setVariantHeader(reply, answer.variant);
        if (answer.lost) return void rest.loseAnswer(request, reply.code(status));
        return reply
          .code(status)
          .type('application/json; charset=utf-8')
          .send(answer.replayed ? storedJson(answer.value) : JSON.stringify(answer.value));
      });
    };
    /** A GET of the allowlist: guarded, free, answered with the view (and its variant header). */
    const view = (path: string, scope: string, param: string, read: (access: AccessContext, id: string) => Promise<Answer<unknown>>) => {
      rest.get(
        path,
        { schema: idParams(param), onRequest: guarded(scope, `GET ${path.replace(`:${param}`, `{${param}}`)}`) },
        async (request, reply) => {
          const answer = await read(request.access!, (request.params as Record<string, string>)[param]!);
          setVariantHeader(reply, answer.variant);
          return answer.value;
        },
      );
    };

    // Spec 2.4, 4.4 rules 1, 2.
    meteredPost('/chat/ask', 200, 'ask', askSchema, (access, body) => resources.ask(access, body.question!));

    // Spec 2.5, 3.1, 4.4 rule 3: answers at once with 202; polling is free.
    meteredPost('/research', 202, 'research', researchSchema, (access, body) => resources.startResearch(access, body.question!));
    view('/research/:job_id', 'research', 'job_id', (access, id) => resources.researchView(access, id));

    // Spec 2.6, 4.4 rule 4: accepted, not yet indexed.
    meteredPost('/training', 202, 'training.write', trainingSchema, (access, body) =>
      resources.startTraining(access, body.file_name!, body.content!),
    );
    view('/training/:document_id', 'training.write', 'document_id', (access, id) => resources.trainingView(access, id));
    view('/training/:document_id/url', 'training.write', 'document_id', (access, id) => resources.trainingUrl(access, id));
  });
}
