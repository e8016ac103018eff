import type { FastifyInstance } from 'fastify';
import { ProblemError } from '../core/state/errors.js';
import { WORKSPACE_KINDS, type Workspace } from '../core/resources/workspace.js';
import type { BrowserSessions } from './browser-session.js';

/**
 * Spec 4.4 rule 6, 9: the fourteen former per-kind read routes (a list and an item route for each of the seven
 * kinds). They still serve the browser application, with the person's browser session, and refuse every
 * bearer token: agents read through POST /chat/ask (scope ask). Not part of the allowlist; no CORS.
 */
export function registerRetiredRoutes(app: FastifyInstance, sessions: BrowserSessions, workspace: Workspace, authUrl: () => string): void {
  const admit = (authorization: string | undefined, request: Parameters<BrowserSessions['current']>[0]) => {
    if (authorization) {
      throw new ProblemError(
        'agent_token_refused',
        'this per-kind read route was retired for agent tokens; agents read through POST /chat/ask (scope ask) or the agent plane',
      );
    }
    if (!sessions.current(request)) {
      throw new ProblemError('browser_session_required', `this route serves the browser application only; sign in at ${authUrl()}`);
    }
  };
  for (const kind of WORKSPACE_KINDS) {
    // More specific than the CORS plugin's `OPTIONS *`: no preflight answer for the browser application's routes.
    app.options(`/${kind}`, (_request, reply) => reply.callNotFound());
    app.options(`/${kind}/:id`, (_request, reply) => reply.callNotFound());
    app.get(`/${kind}`, async (request) => {
      admit(request.headers.authorization, request);
      return { kind, items: workspace[kind] };
    });
    app.get(
      `/${kind}/:id`,
      { schema: { params: { type: 'object', required: ['id'], properties: { id: { type: 'string', maxLength: 200 } } } } },
      async (request) => {
        admit(request.headers.authorization, request);
        const { id } = request.params as { id: string };
        const item = workspace[kind].find((r) => r.id === id);
        if (!item) throw new ProblemError('record_not_found', `no ${kind} record "${id}"`);
        return item;
      },
    );
  }
}
