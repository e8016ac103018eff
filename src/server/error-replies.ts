import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { AgentAccessError, BearerError, OAuthError, ProblemError } from '../core/state/errors.js';
import { RateLimitedError } from '../core/state/rate-limit.js';
import { PROBLEM_TYPE_PREFIX, PROBLEMS, type ProblemCode } from '../protocol/problems.js';
import { pageHeaders } from './page-headers.js';

/** How a route reports errors: OAuth endpoints in RFC 6749 JSON, everything else as RFC 9457 problems. */
export type ErrorStyle = 'oauth' | 'registration' | 'problem' | 'html';

declare module 'fastify' {
  interface FastifyContextConfig {
    errorStyle?: ErrorStyle;
  }
}

/**
 * The one documented error shape for non-OAuth routes (RFC 9457 application/problem+json): the registry's code as
 * `type`, its public message as `title`, the specific sentence as `detail`. The status is the code's, unless the
 * caller names the one it must keep (an injected 5xx, a framework's 4xx).
 */
export function sendProblem(
  reply: FastifyReply,
  code: ProblemCode,
  detail: string,
  extra: Record<string, unknown> = {},
  status: number = PROBLEMS[code].status,
) {
  return reply
    .code(status)
    .type('application/problem+json; charset=utf-8')
    .header('cache-control', 'no-store')
    .send({ type: `${PROBLEM_TYPE_PREFIX}${code}`, title: PROBLEMS[code].title, status, detail, ...extra });
}

/** A problem's `hint` member (RFC 9457 §3.2 extension): what the client's developer should change, where it is known. */
const hintOf = (error: AgentAccessError): { hint?: string } => (error.hint ? { hint: error.hint } : {});

/** The code of a framework error (a body too large, a media type not parsed) that carries only its status. */
const CODE_OF_STATUS: Partial<Record<number, ProblemCode>> = { 413: 'body_too_large', 415: 'unsupported_media_type' };
/** Statuses about the request's size (body, target, header fields) that OAuth endpoints keep rather than answer 400. */
const SIZE_STATUSES = new Set([413, 414, 431]);
const problemCodeOfStatus = (status: number): ProblemCode =>
  status >= 500 ? 'server_error' : (CODE_OF_STATUS[status] ?? 'invalid_request');

export function sendOAuthError(reply: FastifyReply, error: OAuthError) {
  if (error.challenge) reply.header('www-authenticate', error.challenge);
  if (error.retryAfter !== undefined) reply.header('retry-after', error.retryAfter);
  return reply.code(error.status).header('cache-control', 'no-store').header('pragma', 'no-cache').send(error.toJSON());
}

const quoted = (value: string) => `"${value.replace(/["\\]/g, "'")}"`;

/** RFC 6750 §3 challenge with the RFC 9728 resource_metadata parameter. */
export function bearerChallenge(error: BearerError, resourceMetadataUrl: string): string {
  const params: string[] = [];
  if (error.error) params.push(`error=${quoted(error.error)}`, `error_description=${quoted(error.message)}`);
  params.push(`resource_metadata=${quoted(resourceMetadataUrl)}`, `scope=${quoted(error.scope)}`);
  return `Bearer ${params.join(', ')}`;
}

/** Turns an ajv validation error into a sentence that names the parameter. */
export function describeValidation(error: FastifyError): { field: string; description: string } {
  const first = error.validation?.[0];
  if (!first) return { field: '', description: error.message };
  const path = first.instancePath.replace(/^\//, '').split('/');
  if (first.keyword === 'required') {
    const missing = String((first.params as { missingProperty?: string }).missingProperty ?? '');
    return { field: missing, description: `${missing} is required` };
  }
  const field = path[0] ?? '';
  const where = path.join('.') || error.validationContext || 'request';
  if (first.keyword === 'type' && (first.params as { type?: string }).type === 'string' && error.validationContext !== 'body') {
    return { field, description: `${where} must be given once, as a string` };
  }
  if (first.keyword === 'type' && (first.params as { type?: string }).type === 'string')
    return { field, description: `${where} must be a string, given once` };
  return { field, description: `${where} ${first.message ?? 'is invalid'}` };
}

/**
 * The error handler of both servers. Known errors keep their status and code; anything else is a 500
 * whose details stay in the log.
 */
export function errorReplier(options: {
  /** The protected resource metadata's URL under the name the request reached (RFC 9728 §5.1). */
  resourceMetadataUrl: (request: FastifyRequest) => string;
  /** The German error page; `request` tells where it stands (the authorization endpoint's pages say the person was not sent back). */
  htmlError: (status: number, error: string, description: string, hint: string | undefined, request: FastifyRequest) => string;
  onServerError?: (error: Error) => void;
}) {
  return (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const style: ErrorStyle = request.routeOptions.config?.errorStyle ?? 'problem';
    if (error instanceof RateLimitedError) {
      const { limit, reset } = error.state;
      reply.header('retry-after', reset).header('ratelimit-limit', limit).header('ratelimit-remaining', 0).header('ratelimit-reset', reset);
      return sendProblem(reply, error.code, error.message, hintOf(error));
    }
    if (error instanceof BearerError) {
      reply.header('www-authenticate', bearerChallenge(error, options.resourceMetadataUrl(request)));
      return sendProblem(reply, error.code, error.message, { scope: error.scope, ...hintOf(error) }, error.status);
    }
    if (error instanceof OAuthError) {
      if (style === 'html')
        return pageHeaders(reply.code(error.status)).send(options.htmlError(error.status, error.error, error.message, error.hint, request));
      return sendOAuthError(reply, error);
    }
    if (error instanceof ProblemError) {
      if (style === 'html')
        return pageHeaders(reply.code(error.status)).send(options.htmlError(error.status, error.code, error.message, error.hint, request));
      return sendProblem(reply, error.code, error.message, hintOf(error));
    }
    const status = error.statusCode && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : 500;
    if (status === 500)
      options.onServerError?.(
        Object.assign(new Error(`${request.method} ${request.url.split('?')[0]} failed: ${error.message}`), {
          cause: error,
          stack: error.stack,
        }),
      );
    const described = error.validation
      ? describeValidation(error)
      : { field: '', description: status === 500 ? 'internal error' : error.message };
    if (style === 'oauth' || style === 'registration') {
      if (status === 500) return sendOAuthError(reply, new OAuthError('server_error', 'internal error', { status: 500 }));
      const code =
        style === 'registration'
          ? described.field === 'redirect_uris'
            ? 'invalid_redirect_uri'
            : 'invalid_client_metadata'
          : 'invalid_request';
      const description =
        error.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE'
          ? `Content-Type must be ${style === 'registration' ? 'application/json' : 'application/x-www-form-urlencoded'}`
          : described.description;
      return sendOAuthError(reply, new OAuthError(code, description, { status: SIZE_STATUSES.has(status) ? status : 400 }));
    }
    if (style === 'html')
      return pageHeaders(reply.code(status)).send(
        options.htmlError(
          status,
          error.validation ? 'invalid_request' : problemCodeOfStatus(status),
          described.description,
          undefined,
          request,
        ),
      );
    return sendProblem(reply, error.validation ? 'invalid_request' : problemCodeOfStatus(status), described.description, {}, status);
  };
}
