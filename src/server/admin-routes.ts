import type { FastifyInstance } from 'fastify';
import type { Core } from '../core/core.js';
import { safeEqual } from '../core/crypto.js';
import { sendProblem } from './error-replies.js';
import { isLoopbackAddress } from './host-guard.js';
import { adminGrantsSchema, adminRevokeSchema } from './schemas.js';
import { chargesReport } from '../core/charges-report.js';

export const ADMIN_PREFIX = '/_admin';

/**
 * The admin API through which the CLI (and later the dashboard) acts on a running emulator, so the state file
 * keeps a single writer. Loopback peers only, Host checked by the common hook, admin token required.
 */
export function registerAdminRoutes(app: FastifyInstance, core: Core, adminToken: string): void {
  app.register(async (admin) => {
    // More specific than the CORS plugin's `OPTIONS *`: a browser's preflight gets no CORS answer here.
    admin.options('/*', (_request, reply) => reply.callNotFound());
    admin.addHook('onRequest', async (request, reply) => {
      if (request.method === 'OPTIONS') return;
      if (!isLoopbackAddress(request.socket.remoteAddress)) return sendProblem(reply, 403, 'admin_loopback_only', 'the admin API answers loopback peers only');
      const match = /^bearer[ \t]+(\S+)$/i.exec(request.headers.authorization ?? '');
      if (!match || !safeEqual(match[1] as string, adminToken)) {
        reply.header('www-authenticate', 'Bearer realm="agent-access-admin"');
        return sendProblem(reply, 401, 'admin_token_required', 'send the admin token written next to the state file as a bearer token');
      }
    });
    admin.get('/health', async () => ({ ok: true, pid: process.pid, base_url: core.urls.baseUrl, auth_url: core.urls.authUrl }));
    admin.get('/grants', { schema: adminGrantsSchema }, async (request) => ({ grants: core.listGrants(request.query as { person_id?: string; client_id?: string }) }));
    admin.get('/charges', async () => chargesReport(core, await core.persistence.readLedger()));
    admin.post('/grants/:id/revoke', { schema: adminRevokeSchema }, async (request) => {
      const { id } = request.params as { id: string };
      const grant = await core.revokeGrant(id, 'admin');
      return { grant: core.listGrants().find((g) => g.id === grant.id) };
    });
  }, { prefix: ADMIN_PREFIX });
}
