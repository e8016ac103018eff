import type { FastifyInstance } from 'fastify';
import type { Core } from '../core/core.js';
import { safeEqual } from '../core/state/crypto.js';
import { sendProblem } from './error-replies.js';
import { isAllowedHost, isLoopbackAddress } from './host-guard.js';
import {
  adminActionsSchema,
  adminAdvanceSchema,
  adminConsentSchema,
  adminFaultIdSchema,
  adminFaultSchema,
  adminDecideSchema,
  adminFindingsSchema,
  adminGrantsSchema,
  adminResetSchema,
  adminRevokeSchema,
  adminSnapshotListSchema,
  adminSnapshotRestoreSchema,
  adminSnapshotSaveSchema,
  adminTokensSchema,
} from './schemas.js';
import { parseConsentPolicy } from '../core/emulation/consent-policy.js';
import { setConsentPolicy } from '../core/oauth/consent.js';
import { grantView, pageOfGrants, revokeGrant } from '../core/oauth/grants-admin.js';
import { issueTokensWithoutConsent } from '../core/oauth/issue-tokens.js';
import type { Snapshots } from './snapshots.js';
import { chargesReport } from '../core/resources/charges-report.js';
import type { AgentPlane } from '../core/resources/agent-plane.js';
import { ProblemError } from '../core/state/errors.js';
import { AdminFeed } from './admin-feed.js';
import type { ResourceService } from '../core/resources/resource-service.js';
import { ManualClock, parseDuration } from '../core/state/clock.js';
import type { FaultSpec } from '../core/emulation/fault-spec.js';
import type { Faults } from '../core/emulation/faults.js';
import { ADMIN_PAGE, ADMIN_PREFIX, ADMIN_ROUTES, pageOf } from '../protocol/admin-api.js';
import type { FindingsList } from '../protocol/findings.js';

/** `?limit=` and `?offset=` of a paged list (ADMIN_PAGE), their forms checked by the route's schema. */
const paging = (query: { limit?: string; offset?: string }) => ({
  offset: Number(query.offset ?? 0),
  limit: Math.min(Number(query.limit ?? ADMIN_PAGE.default), ADMIN_PAGE.max),
});

/** A request's path under the admin URL, as `next` links give it. */
const underAdmin = (url: string) => url.slice(ADMIN_PREFIX.length);

export interface AdminOptions {
  adminToken: string;
  /** The port `{base_url}` listens on (the Host header must name it). */
  port: () => number | undefined;
  plane?: AgentPlane;
  /** Moves research jobs and training steps along after the clock was advanced. */
  resources?: ResourceService;
  /** Faults on purpose: armed, listed and cleared here. */
  faults?: Faults;
  /** Save, restore and reset the whole state. */
  snapshots?: Snapshots;
}

/**
 * The admin API through which the CLI and the dashboard act on a running emulator, so the state file keeps a
 * single writer. Loopback peers only, a loopback Host only (whatever the bind address: no DNS rebinding), admin
 * token required; no CORS, so a page in the person's browser cannot call it.
 */
export function registerAdminRoutes(app: FastifyInstance, core: Core, options: AdminOptions): void {
  const { adminToken, plane } = options;
  const feed = new AdminFeed(core, options.faults ? () => options.faults!.views() : undefined);
  // Open streams would hold the server open until the stop grace period ends.
  app.addHook('preClose', (done) => {
    feed.close();
    done();
  });
  app.register(
    async (admin) => {
      // More specific than the CORS plugin's `OPTIONS *`: a browser's preflight gets no CORS answer here.
      admin.options('/*', (_request, reply) => reply.callNotFound());
      admin.addHook('onRequest', async (request, reply) => {
        if (request.method === 'OPTIONS') return;
        if (!isLoopbackAddress(request.socket.remoteAddress))
          return sendProblem(reply, 'admin_loopback_only', 'the admin API answers loopback peers only');
        if (!isAllowedHost(request.headers.host, options.port() ?? -1))
          return sendProblem(reply, 'host_not_allowed', 'the admin API answers only requests addressed to a loopback host name');
        const match = /^bearer[ \t]+(\S+)$/i.exec(request.headers.authorization ?? '');
        if (!match || !safeEqual(match[1] as string, adminToken)) {
          reply.header('www-authenticate', 'Bearer realm="agent-access-admin"');
          return sendProblem(reply, 'admin_token_required', 'send the admin token written next to the state file as a bearer token');
        }
      });
      // Admin bodies are exact: a misspelt field (clientId for client_id) is an error, not silently dropped as
      // the service's own endpoints drop unknown parameters.
      admin.addHook('preValidation', async (request, reply) => {
        const properties = (request.routeOptions.schema?.body as { properties?: Record<string, unknown> } | undefined)?.properties;
        if (!properties || typeof request.body !== 'object' || request.body === null) return;
        const unknown = Object.keys(request.body).filter((k) => !Object.hasOwn(properties, k));
        if (unknown.length > 0)
          return sendProblem(
            reply,
            'invalid_request',
            `unknown field ${unknown.join(', ')}; allowed: ${Object.keys(properties).join(', ')}`,
          );
      });
      admin.get(ADMIN_ROUTES.health, async () => ({
        ok: true,
        pid: process.pid,
        base_url: core.urls.baseUrl,
        auth_url: core.urls.authUrl,
      }));
      admin.get(ADMIN_ROUTES.grants, { schema: adminGrantsSchema }, async (request) => {
        const { person_id, client_id, ...query } = request.query as {
          person_id?: string;
          client_id?: string;
          limit?: string;
          offset?: string;
        };
        const { offset, limit } = paging(query);
        const page = pageOfGrants(core, { person_id, client_id }, { offset, limit });
        return { grants: page.grants, ...pageOf(underAdmin(request.url), page.total, offset, limit, page.grants.length) };
      });
      // From the committed ledger lines only, totals included: the total is always the sum of the entries answered.
      admin.get(ADMIN_ROUTES.charges, async () => chargesReport(core, await core.persistence.readCharges()));
      admin.post(ADMIN_ROUTES.revokeGrant, { schema: adminRevokeSchema }, async (request) => {
        const { id } = request.params as { id: string };
        const by = (request.query as { by?: 'person' | 'admin' }).by ?? 'admin';
        const grant = await revokeGrant(core, id, by);
        return { grant: grantView(core, grant) };
      });
      admin.get(ADMIN_ROUTES.overview, async () => feed.overview());
      // Client findings: observations of each client's habits, never faults (src/core/emulation/findings.ts).
      admin.get(ADMIN_ROUTES.findings, { schema: adminFindingsSchema }, async (request): Promise<FindingsList> => {
        const { offset, limit } = paging(request.query as { limit?: string; offset?: string });
        const all = core.findings.list();
        const findings = all.slice(offset, offset + limit);
        return { findings, ...pageOf(underAdmin(request.url), all.length, offset, limit, findings.length) };
      });
      admin.delete(ADMIN_ROUTES.findings, async () => {
        const cleared = core.findings.list().length;
        core.findings.clear();
        return { cleared };
      });
      admin.get(ADMIN_ROUTES.events, async (_request, reply) => {
        reply.hijack();
        await feed.stream(reply.raw);
      });
      const clockView = () => ({
        mode: core.clock instanceof ManualClock ? 'manual' : 'system',
        now: core.clock.now(),
        iso: new Date(core.clock.now()).toISOString(),
      });
      admin.get(ADMIN_ROUTES.clock, async () => clockView());
      admin.post(ADMIN_ROUTES.advanceClock, { schema: adminAdvanceSchema }, async (request) => {
        if (!(core.clock instanceof ManualClock))
          throw new ProblemError(
            'clock_not_manual',
            'the clock is real time; start the emulator with --clock manual (or clock: "manual") to move it',
          );
        const { by } = request.body as { by: string | number };
        let duration: number;
        try {
          duration = parseDuration(by);
        } catch (e) {
          throw new ProblemError('invalid_duration', (e as Error).message);
        }
        core.clock.advance(duration);
        // Everything that runs on the clock catches up before the answer: jobs, training steps, expired records.
        await options.resources?.settle();
        await options.faults?.runDue();
        if (core.prune()) await core.commit();
        return clockView();
      });
      admin.post(ADMIN_ROUTES.tokens, { schema: adminTokensSchema }, async (request) =>
        issueTokensWithoutConsent(core, request.body as Parameters<typeof issueTokensWithoutConsent>[1]),
      );
      // Consent as code: who answers the consent screen, for all clients or one.
      admin.get(ADMIN_ROUTES.consent, async () => core.consentPolicies.view());
      admin.post(ADMIN_ROUTES.consent, { schema: adminConsentSchema }, async (request) => {
        const body = request.body as { decision: string; scopes?: string[]; client_id?: string };
        const policy = parseConsentPolicy(body);
        if (body.client_id !== undefined && !Object.hasOwn(core.state.clients, body.client_id))
          throw new ProblemError(
            'client_not_found',
            `no client "${body.client_id}"; leave client_id out to set the policy for all clients`,
          );
        setConsentPolicy(core, body.client_id ?? null, policy);
        return core.consentPolicies.view();
      });
      // Faults on purpose: armed here, listed with what they did, cleared one by one or all at once.
      const faults = options.faults;
      if (faults) {
        admin.get(ADMIN_ROUTES.faults, async () => ({ faults: faults.list() }));
        admin.post(ADMIN_ROUTES.faults, { schema: adminFaultSchema }, async (request, reply) => {
          const fault = faults.arm(request.body as FaultSpec);
          // A grant fault for "now" has happened by the time the caller reads the answer.
          await faults.runDue();
          return reply.code(201).send({ fault });
        });
        admin.delete(ADMIN_ROUTES.fault, { schema: adminFaultIdSchema }, async (request) => ({
          cleared: faults.clear((request.params as { id: string }).id),
        }));
        admin.delete(ADMIN_ROUTES.faults, async () => ({ cleared: faults.clear() }));
      }
      admin.get(ADMIN_ROUTES.actions, { schema: adminActionsSchema }, async (request) => {
        const { status } = request.query as { status?: string };
        return {
          actions: Object.values(core.state.pending_actions)
            .filter((a) => !status || a.status === status)
            .sort((a, b) => a.created_at - b.created_at),
        };
      });
      const snapshots = (): Snapshots => {
        if (!options.snapshots) throw new ProblemError('snapshots_disabled', 'this server runs without snapshots');
        return options.snapshots;
      };
      admin.get(ADMIN_ROUTES.snapshots, { schema: adminSnapshotListSchema }, async () => snapshots().list());
      admin.post(ADMIN_ROUTES.saveSnapshot, { schema: adminSnapshotSaveSchema }, async (request, reply) => {
        const info = await snapshots().save((request.params as { name: string }).name);
        return reply.code(201).send(info);
      });
      admin.post(ADMIN_ROUTES.restoreSnapshot, { schema: adminSnapshotRestoreSchema }, async (request) =>
        snapshots().restore((request.params as { name: string }).name),
      );
      admin.post(ADMIN_ROUTES.reset, { schema: adminResetSchema }, async () => snapshots().reset());
      admin.post(ADMIN_ROUTES.decideAction, { schema: adminDecideSchema }, async (request) => {
        if (!plane) throw new ProblemError('agent_plane_disabled', 'this server runs without the agent plane');
        const { id } = request.params as { id: string };
        const { decision } = request.body as { decision: 'approve' | 'reject' };
        const action = Object.hasOwn(core.state.pending_actions, id) ? core.state.pending_actions[id] : undefined;
        if (!action) throw new ProblemError('action_not_found', `no write action ${id}`);
        // Decided as the person it belongs to, through the same operation as the approval page.
        return { action: await plane.decide(action.person_id, id, decision) };
      });
    },
    { prefix: ADMIN_PREFIX },
  );
}
