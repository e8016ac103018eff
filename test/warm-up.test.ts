/**
 * Ready means ready: before it says it is ready, the emulator answers one request of its own over a real socket, so
 * that a client's first request finds the code every request runs compiled. That request is nobody's: it is in no
 * request log, uses up no fault and leaves no finding. (How much faster the first request is lives in `npm run
 * bench`, not here.)
 */
import type { FastifyInstance } from 'fastify';
import { describe, expect, it } from 'vitest';
import type { AppEvent } from '../src/core/state/events.js';
import { startEmulator } from './helpers/emulator.js';
import { bearer, http } from './helpers/oauth.js';

const METADATA = '/.well-known/oauth-authorization-server';

describe('the emulator warms its request path before the ready point', () => {
  it('it has answered one GET of the metadata over a socket of its own before start resolves, read to its end', async () => {
    const served: Array<{ url: string; status: number; remotePort?: number }> = [];
    const extendApi = (app: FastifyInstance) =>
      void app.addHook('onResponse', (request, reply, done) => {
        served.push({ url: request.url, status: reply.statusCode, remotePort: request.socket.remotePort });
        done();
      });
    const emu = await startEmulator({ extendApi });
    expect(served).toEqual([{ url: METADATA, status: 200, remotePort: expect.any(Number) }]);
    // A client's request is the client's own: logged as any.
    const events: AppEvent[] = [];
    emu.core.events.subscribe((event) => void events.push(event));
    expect((await http(`${emu.baseUrl}${METADATA}`)).status).toBe(200);
    expect(served).toHaveLength(2);
    expect(events.filter((e) => e.name === 'request.served').map((e) => e.data)).toEqual([
      expect.objectContaining({ server: 'api', method: 'GET', path: METADATA, status: 200 }),
    ]);
  });

  // A dual-stack bind (`::`) sees the warm-up come from ::ffff:127.0.0.1: the mark, not the address, tells it apart.
  for (const host of ['127.0.0.1', '::']) {
    it(`its request is nobody's (bound to ${host}): a fault armed at start for every route fires on the client's first request, and the dashboard's request list starts with the client's`, async () => {
      const emu = await startEmulator({ host, faults: [{ kind: 'server_error', status: 503, count: 1 }] });
      const first = await http(`${emu.baseUrl}${METADATA}`);
      expect(first.status).toBe(503);
      expect((await http(`${emu.baseUrl}${METADATA}`)).status).toBe(200);
      const overview = (await http(`${emu.adminUrl}/overview`, { headers: bearer(emu.adminToken) })).json() as {
        requests: Array<{ path: string; status: number }>;
        faults: Array<{ fired: number }>;
      };
      expect(overview.requests.map((r) => [r.path, r.status])).toEqual([
        [METADATA, 503],
        [METADATA, 200],
      ]);
      expect(overview.faults).toEqual([expect.objectContaining({ fired: 1 })]);
    });
  }

  it("no client can pass for it: a request with the warm-up's header and another value is logged and meets the fault", async () => {
    const emu = await startEmulator({ faults: [{ kind: 'server_error', status: 503, count: 1 }] });
    const events: AppEvent[] = [];
    emu.core.events.subscribe((event) => void events.push(event));
    const forged = await http(`${emu.baseUrl}${METADATA}`, { headers: { 'agent-access-warm-up': 'guess' } });
    expect(forged.status).toBe(503);
    expect(events.filter((e) => e.name === 'request.served').map((e) => e.data)).toEqual([
      expect.objectContaining({ path: METADATA, status: 503 }),
    ]);
  });
});
