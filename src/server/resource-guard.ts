import type { FastifyRequest } from 'fastify';
import type { Core } from '../core/core.js';
import { BearerError } from '../core/state/errors.js';
import { authenticate, type AccessContext } from '../core/oauth/resource-guard.js';
import { nameReached } from '../core/oauth/resource-names.js';

declare module 'fastify' {
  interface FastifyRequest {
    access?: AccessContext;
    /** A genuine token the guard refused (a revoked grant, a dead family, a missing scope): whose it was. */
    refusedToken?: BearerError['token'];
    /** A bearer token came that names no client (expired, malformed, another signer's): the log says one came. */
    unreadToken?: 'expired' | 'invalid';
  }
}

/**
 * The guard every protected route uses (spec 4.4, 5.5): a hook (onRequest, so before any body is read) that admits a request only with a valid
 * agent token holding `scope`, checked against the live grant and family on every request. Only the
 * Authorization header counts; a token in the query string is ignored (RFC 6750 §2.3 is not offered). The token's
 * audience must be the resource as this request reached it: `{base_url}/mcp` under the loopback name of its Host.
 */
export function requireScope(core: Core, scope: string | null, challengeScope?: string): (request: FastifyRequest) => Promise<void> {
  return async function resourceGuard(request: FastifyRequest) {
    try {
      request.access = await authenticate(
        core,
        request.headers.authorization,
        scope,
        challengeScope,
        `${request.method} ${request.routeOptions.url ?? request.url.split('?')[0]}`,
        nameReached(core.resource, request.headers.host).resource,
      );
      request.access.arrival = request.arrival;
    } catch (e) {
      if (e instanceof BearerError) {
        request.refusedToken = e.token;
        // Without a token the error names none (RFC 6750 §3.1): any other refusal without an owner was a token not read.
        if (e.error !== undefined && e.token === null) request.unreadToken = e.reason === 'token_expired' ? 'expired' : 'invalid';
      }
      throw e;
    }
  };
}
