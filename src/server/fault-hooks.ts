import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Core } from '../core/core.js';
import { OAuthError } from '../core/state/errors.js';
import type { Fault, Faults } from '../core/emulation/faults.js';
import { ADMIN_PREFIX } from '../protocol/admin-api.js';
import { sendOAuthError, sendProblem } from './error-replies.js';
import { pageHeaders } from './page-headers.js';
import type { WarmUpRequests } from './warm-up-request.js';
import { errorPage } from './views.js';

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
export function installFaultHooks(app: FastifyInstance, core: Core, faults: Faults, warmUp?: WarmUpRequests): void {
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
