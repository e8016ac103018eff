import type { Server } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import { OAuthError } from '../core/state/errors.js';
import { sendOAuthError, sendProblem, type ErrorStyle } from './error-replies.js';
import { pageHeaders } from './page-headers.js';
import { errorPage } from './views.js';

interface KnownPath {
  readonly pattern: RegExp;
  readonly methods: Set<string>;
  /** The error shape of the path's routes, which its 405 keeps. */
  readonly style: ErrorStyle;
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The paths of one server with the methods routed on each, collected as routes are added. */
class KnownRoutes {
  readonly #paths = new Map<string, KnownPath>();

  add(route: RouteOptions): void {
    // Wildcards are the CORS plugin's and the admin API's `OPTIONS *`: no path of their own.
    if (route.url.includes('*')) return;
    if ([route.method].flat().every((method) => method === 'OPTIONS')) return;
    let known = this.#paths.get(route.url);
    if (!known) {
      const segments = route.url.split('/').map((segment) => (segment.startsWith(':') ? '[^/]+' : escapeRegExp(segment)));
      known = { pattern: new RegExp(`^${segments.join('/')}$`), methods: new Set(), style: route.config?.errorStyle ?? 'problem' };
      this.#paths.set(route.url, known);
    }
    for (const method of [route.method].flat()) {
      // OPTIONS routes of their own only refuse a preflight (retired routes, admin API): not a method the path takes.
      if (method === 'OPTIONS') continue;
      known.methods.add(method);
      // fastify answers HEAD wherever it answers GET (exposeHeadRoutes).
      if (method === 'GET') known.methods.add('HEAD');
    }
  }

  /** The methods and error shape of the routes whose path matches, or undefined for a path no route has. */
  match(path: string): { methods: string[]; style: ErrorStyle } | undefined {
    const methods = new Set<string>();
    let style: ErrorStyle | undefined;
    for (const known of this.#paths.values()) {
      if (!known.pattern.test(path)) continue;
      for (const method of known.methods) methods.add(method);
      style ??= known.style;
    }
    return style === undefined ? undefined : { methods: [...methods].sort(), style };
  }
}

const routesOf = new WeakMap<Server, KnownRoutes>();

/** Records every route added to `app` (and its child contexts) from now on, for the 405 answers below. */
export function trackRoutes(app: FastifyInstance): void {
  const routes = new KnownRoutes();
  routesOf.set(app.server, routes);
  app.addHook('onRoute', (route) => routes.add(route));
}

/**
 * RFC 9110 §15.5.6 (https://www.rfc-editor.org/rfc/rfc9110#section-15.5.6): a known path asked with a method it does
 * not take answers 405 with `Allow`, in the error shape of the path's routes; undefined when the path is unknown (a
 * 404). OPTIONS stays with the CORS plugin and the routes that refuse preflight, as before. A method the path takes
 * (a parameter the router refused) is no 405 either.
 */
export function answerMethodNotAllowed(request: FastifyRequest, reply: FastifyReply): FastifyReply | undefined {
  if (request.method === 'OPTIONS') return undefined;
  const path = request.url.split('?')[0] ?? request.url;
  const known = routesOf.get(request.server.server)?.match(path);
  if (!known || known.methods.includes(request.method)) return undefined;
  const allow = known.methods.join(', ');
  const description = `${request.method} is not a method of ${path}; it takes ${allow}`;
  reply.header('allow', allow);
  if (known.style === 'oauth' || known.style === 'registration')
    return sendOAuthError(reply, new OAuthError('invalid_request', description, { status: 405 }));
  if (known.style === 'html')
    return pageHeaders(reply.code(405)).send(errorPage('Anfrage kann nicht bearbeitet werden', 'method_not_allowed', description));
  return sendProblem(reply, 'method_not_allowed', description);
}
