import cookie from '@fastify/cookie';
import formbody from '@fastify/formbody';
import type { FastifyInstance } from 'fastify';
import type { QueryValue } from '../core/oauth/authorize.js';
import { DEFAULT_PRICES } from '../core/state/charges.js';
import type { Core } from '../core/core.js';
import { answerByPolicy, beginConsent, checkAuthorizationRequest, decideConsent } from '../core/oauth/consent.js';
import { ProblemError } from '../core/state/errors.js';
import { grantView, pageOfGrants, revokeGrant } from '../core/oauth/grants-admin.js';
import { installCommonHooks, newFastify, notFound, type AppOptions } from './app-common.js';
import { BrowserSessions } from './browser-session.js';
import { pageHeaders } from './page-headers.js';
import { actionDecisionSchema, authorizeSchema, consentSchema, settingsRevokeSchema, settingsSchema } from './schemas.js';
import { SETTINGS_PAGE_SIZE, actionPage, actionsPage, consentPage, documentPage, errorPage, revokePage, settingsPage } from './views.js';

const SETTINGS_PURPOSE = 'settings';

/** `{auth_url}`: the browser-facing host with the authorization endpoint, consent and settings pages. */
export async function buildAuthApp(core: Core, options: AppOptions): Promise<FastifyInstance> {
  const app = newFastify(options);
  installCommonHooks(app, core, 'auth', options);
  // No CORS on this origin, its 404s included.
  app.setNotFoundHandler(notFound);
  await app.register(cookie);
  await app.register(formbody);
  const sessions =
    options.sessions ??
    new BrowserSessions(
      () => core.defaultPerson.id,
      () => `aa_session_${options.port() ?? 0}`,
    );

  // Spec 4.2, OAuth 2.1 §4.1.1. No CORS here: it is a top-level browser navigation.
  app.get('/oauth/authorize', { schema: authorizeSchema, config: { errorStyle: 'html' } }, async (request, reply) => {
    const query = request.query as Record<string, QueryValue>;
    const hint =
      typeof query.login_hint === 'string'
        ? core.persons.find((p) => p.id === query.login_hint || p.email === query.login_hint)
        : undefined;
    const outcome = checkAuthorizationRequest(core, query);
    if (outcome.kind === 'error_page') {
      const accept = request.headers.accept ?? '';
      if (accept.includes('application/json') && !accept.includes('text/html'))
        return reply.code(400).header('cache-control', 'no-store').send(outcome.error.toJSON());
      return pageHeaders(reply.code(400)).send(
        errorPage('Anfrage kann nicht bearbeitet werden', outcome.error.error, outcome.error.message, outcome.error.hint, true),
      );
    }
    if (outcome.kind === 'redirect') return reply.code(302).header('cache-control', 'no-store').redirect(outcome.location, 302);
    const session = sessions.ensure(request, reply, hint?.id);
    const person = core.person(session.person_id) ?? core.defaultPerson;
    const interaction = beginConsent(core, outcome.request, person.id, session.id);
    // Consent as code: the page's interaction is answered by the policy, as the form would, and the browser sent on.
    const answered = answerByPolicy(core, interaction);
    if (answered) return reply.header('cache-control', 'no-store').redirect(await answered, 302);
    const html = consentPage({
      request: outcome.request,
      person,
      ticket: interaction.ticket,
      csrf: sessions.csrfToken(session, interaction.ticket),
      resource: outcome.request.resource ?? core.resource,
      prices: options.prices ?? DEFAULT_PRICES,
    });
    return pageHeaders(reply, [new URL(outcome.request.redirect_uri).origin]).send(html);
  });

  // The consent form posts here (spec 5.6); the answer sends the browser back to the client.
  app.post('/consent', { schema: consentSchema, config: { errorStyle: 'html' } }, async (request, reply) => {
    const body = request.body as { interaction: string; csrf: string; decision: 'approve' | 'deny' };
    const session = sessions.current(request);
    if (!session || !sessions.checkCsrf(session, body.interaction, body.csrf)) {
      throw new ProblemError(
        'csrf_check_failed',
        'Dieses Formular gehört nicht zu Ihrer Sitzung. Bitte starten Sie die Anmeldung in der Anwendung erneut.',
      );
    }
    const location = await decideConsent(core, body.interaction, session.id, body.decision);
    return reply.header('cache-control', 'no-store').redirect(location, 302);
  });

  app.get('/', async (_request, reply) => reply.redirect('/settings', 302));

  /** A grant of this person, as the settings page lists it; another person's is none. */
  const ownGrant = (id: string, personId: string) => {
    const grant = Object.hasOwn(core.state.grants, id) ? core.state.grants[id] : undefined;
    return grant && grant.person_id === personId ? grantView(core, grant) : undefined;
  };

  // Where GET /training/{id}/url leads: the person's own documents and the shared knowledge base, escaped.
  app.get(
    '/documents/:id',
    {
      schema: { params: { type: 'object', required: ['id'], properties: { id: { type: 'string', maxLength: 200 } } } },
      config: { errorStyle: 'html' },
    },
    async (request, reply) => {
      const session = sessions.ensure(request, reply);
      const doc = options.documents?.(session.person_id, (request.params as { id: string }).id);
      if (!doc)
        throw new ProblemError('training_document_not_found', 'Dieses Dokument gibt es nicht, oder es gehört nicht zu Ihrem Konto.');
      return pageHeaders(reply).send(documentPage(doc));
    },
  );

  app.get('/settings', { schema: settingsSchema, config: { errorStyle: 'html' } }, async (request, reply) => {
    const session = sessions.ensure(request, reply);
    const person = core.person(session.person_id) ?? core.defaultPerson;
    const query = request.query as { revoked?: string; page?: string };
    // The result line names the application: from the person's own grant, never from the link's text.
    const revoked = query.revoked ? ownGrant(query.revoked, person.id) : undefined;
    const pageAt = (page: number) =>
      pageOfGrants(
        core,
        { person_id: person.id },
        { offset: (page - 1) * SETTINGS_PAGE_SIZE, limit: SETTINGS_PAGE_SIZE, activeFirst: true },
      );
    let page = Number(query.page ?? 1);
    let grants = pageAt(page);
    // A page past the last (the grants shrank since the link was made) shows the last.
    if (grants.grants.length === 0 && grants.total > 0) grants = pageAt((page = Math.ceil(grants.total / SETTINGS_PAGE_SIZE)));
    return pageHeaders(reply).send(settingsPage({ person, grants, page, ...(revoked?.status === 'revoked' ? { revoked } : {}) }));
  });

  // The question before a revocation (issue 45.10): the settings page's button leads here; this page's form revokes.
  app.get(
    '/settings/grants/:id/revoke',
    { schema: { params: settingsRevokeSchema.params }, config: { errorStyle: 'html' } },
    async (request, reply) => {
      const session = sessions.ensure(request, reply);
      const grant = ownGrant((request.params as { id: string }).id, session.person_id);
      if (!grant) throw new ProblemError('grant_not_found', 'Diesen Zugriff gibt es nicht, oder er gehört nicht zu Ihrem Konto.');
      return pageHeaders(reply).send(revokePage({ grant, csrf: sessions.csrfToken(session, SETTINGS_PURPOSE) }));
    },
  );

  // Spec 3.3, 5.7: the person revokes; it applies from the next request.
  app.post('/settings/grants/:id/revoke', { schema: settingsRevokeSchema, config: { errorStyle: 'html' } }, async (request, reply) => {
    const session = sessions.current(request);
    const { csrf } = request.body as { csrf: string };
    if (!session || !sessions.checkCsrf(session, SETTINGS_PURPOSE, csrf)) {
      throw new ProblemError('csrf_check_failed', 'Dieses Formular gehört nicht zu Ihrer Sitzung. Bitte laden Sie die Einstellungen neu.');
    }
    const { id } = request.params as { id: string };
    await revokeGrant(core, id, 'person', session.person_id);
    return reply.redirect(`/settings?revoked=${encodeURIComponent(id)}`, 303);
  });

  // Spec 2.7 workspace.write, 4.4 rule 1: the person approves or rejects each write action of an agent.
  const plane = options.plane;
  if (plane) {
    const actionPurpose = (id: string) => `action:${id}`;
    const clientName = (clientId: string) => core.state.clients[clientId]?.client_name ?? clientId;
    app.get('/actions', { config: { errorStyle: 'html' } }, async (request, reply) => {
      const session = sessions.ensure(request, reply);
      const actions = plane.actionsOf(session.person_id).map((a) => ({ ...a, client_name: clientName(a.client_id) }));
      return pageHeaders(reply).send(actionsPage({ actions }));
    });
    app.get('/actions/:id', { schema: { params: actionDecisionSchema.params }, config: { errorStyle: 'html' } }, async (request, reply) => {
      const session = sessions.ensure(request, reply);
      const action = plane.actionOf(session.person_id, (request.params as { id: string }).id);
      if (!action) throw new ProblemError('action_not_found', 'Diese Aktion gibt es nicht, oder sie gehört nicht zu Ihrem Konto.');
      const notice = { approved: 'Freigegeben.', rejected: 'Abgelehnt.' }[(request.query as { decided?: string }).decided ?? ''];
      return pageHeaders(reply).send(
        actionPage({
          action,
          clientName: clientName(action.client_id),
          csrf: sessions.csrfToken(session, actionPurpose(action.id)),
          notice,
        }),
      );
    });
    app.post('/actions/:id', { schema: actionDecisionSchema, config: { errorStyle: 'html' } }, async (request, reply) => {
      const session = sessions.current(request);
      const { id } = request.params as { id: string };
      const { csrf, decision } = request.body as { csrf: string; decision: 'approve' | 'reject' };
      if (!session || !sessions.checkCsrf(session, actionPurpose(id), csrf)) {
        throw new ProblemError('csrf_check_failed', 'Dieses Formular gehört nicht zu Ihrer Sitzung. Bitte laden Sie die Seite neu.');
      }
      const action = await plane.decide(session.person_id, id, decision);
      return reply.redirect(`/actions/${encodeURIComponent(id)}?decided=${action.status}`, 303);
    });
  }

  return app;
}
