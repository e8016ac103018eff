/**
 * The admin stream the dashboard reads: an overview, then every core event after it, then ticks; loopback only,
 * Host checked, admin token required, no CORS, no secrets in what it sends.
 */
import { describe, expect, it } from 'vitest';
import { EventEmitter } from 'node:events';
import { Core } from '../src/core/core.js';
import { MemoryPersistence } from '../src/store/memory-persistence.js';
import { AdminFeed } from '../src/server/admin-feed.js';
import { loadFixtures } from '../src/loaders/fixtures.js';
import { ManualClock, MINUTE } from '../src/core/state/clock.js';
import type { Overview } from '../src/protocol/overview.js';
import { authenticate } from '../src/core/oauth/resource-guard.js';
import { openAdminStream } from './helpers/admin-stream.js';
import { startEmulator } from './helpers/emulator.js';
import { authorizeAndApprove, http, postJson } from './helpers/oauth.js';

/**
 * A feed on a core whose ledger read waits for `open()`: events raised meanwhile certainly arrive while the
 * overview is being built. `raw` stands in for the HTTP response and records what is written.
 */
async function gatedFeed() {
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  class GatedPersistence extends MemoryPersistence {
    override async readCharges() {
      await gate;
      return super.readCharges();
    }
  }
  const core = await Core.open({ clock: new ManualClock(), persistence: new GatedPersistence(), persons: (await loadFixtures()).persons });
  core.setUrls({ baseUrl: 'http://127.0.0.1:4100', authUrl: 'http://127.0.0.1:4101' });
  const written: string[] = [];
  const raw = Object.assign(new EventEmitter(), {
    writableEnded: false,
    destroyed: false,
    writableLength: 0,
    ended: false,
    writeHead: () => undefined,
    write: (text: string) => written.push(text),
    end: () => void (raw.ended = true),
  });
  return { core, feed: new AdminFeed(core), raw, written, open };
}

describe('admin stream: GET /_admin/events', () => {
  it('sends the overview first, then each event after it with its sequence number as id, then ticks with the server clock', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 21, 9, 0, 0));
    const emu = await startEmulator({ clock });
    const stream = await openAdminStream(emu);
    expect(stream.res.statusCode).toBe(200);
    expect(stream.res.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(stream.res.headers['cache-control']).toBe('no-store');
    await stream.until((m) => m.some((x) => x.event === 'overview'), 'overview');
    const overview = stream.messages[0]!;
    expect(overview.event).toBe('overview');
    expect(overview.data.now).toBe(clock.now());

    const flow = await authorizeAndApprove(emu, { scope: 'ask' });
    await stream.until((m) => m.some((x) => x.event === 'tokens.issued'), 'tokens.issued');
    const events = stream.messages.filter((m) => m.event !== 'overview' && m.event !== 'tick');
    expect(events.map((e) => e.event)).toEqual(
      expect.arrayContaining([
        'client.registered',
        'consent.shown',
        'consent.approved',
        'grant.created',
        'code.issued',
        'tokens.issued',
        'request.served',
      ]),
    );
    // Consecutive sequence numbers from the overview's on: nothing lost, nothing twice.
    expect(events.map((e) => Number(e.id))).toEqual(events.map((_, i) => overview.data.seq + 1 + i));
    expect(events.every((e) => e.data.seq === Number(e.id) && e.data.name === e.event)).toBe(true);
    expect(events.find((e) => e.event === 'grant.created')?.data.data).toMatchObject({ client_id: flow.client_id, scopes: ['ask'] });

    clock.advance(16 * MINUTE);
    await stream.until((m) => m.some((x) => x.event === 'tick' && x.data.now === clock.now()), 'a tick with the advanced clock');
    stream.close();
  });

  it('events raised while the overview is built are sent after it if newer, never twice, never lost', async () => {
    const { core, feed, raw, written, open } = await gatedFeed();
    const registered = (n: number) =>
      core.events.emit('client.registered', { client_id: `client-${n}`, client_name: `C${n}`, redirect_uris: [] });
    const streaming = feed.stream(raw as never);
    registered(1); // during the overview: in the backlog, and (seq 1 <= overview seq) already in what the overview shows
    open();
    await streaming;
    registered(2); // live
    const frames = written
      .join('')
      .split('\n\n')
      .filter((f) => f.startsWith('event:'));
    const names = frames.map((f) => /^event: (\S+)/.exec(f)![1]);
    const ids = frames.map((f) => /\nid: (\d+)/.exec(f)?.[1]).map(Number);
    expect(names).toEqual(['overview', 'client.registered']);
    expect(ids).toEqual([1, 2]);
    feed.close();
  });

  it('a reader gone, or a server stopping, while the overview is built: the stream ends and nothing more is written', async () => {
    for (const ending of ['reader left', 'server stopping'] as const) {
      const { core, feed, raw, written, open } = await gatedFeed();
      const streaming = feed.stream(raw as never);
      if (ending === 'reader left') {
        raw.destroyed = true;
        raw.emit('close');
      } else feed.close();
      open();
      await streaming;
      const before = written.length;
      core.events.emit('client.registered', { client_id: 'c', client_name: 'C', redirect_uris: [] });
      expect(written.length, ending).toBe(before);
      expect(written.join(''), ending).not.toContain('event: overview');
      expect(raw.ended, ending).toBe(true);
      feed.close();
    }
  });

  it('a stopping emulator ends the stream at once instead of waiting out the grace period', async () => {
    const emu = await startEmulator();
    const stream = await openAdminStream(emu);
    await stream.until((m) => m.length > 0, 'overview');
    const started = Date.now();
    await emu.stop();
    await stream.done;
    expect(Date.now() - started).toBeLessThan(3000);
  });
});

describe('admin overview: GET /_admin/overview', () => {
  it('shows grants, families, jobs, charges, actions and requests, and no secret: no hashes, keys or tokens', async () => {
    const emu = await startEmulator();
    const flow = await authorizeAndApprove(emu, { scope: 'ask research' });
    const bearer = { authorization: `Bearer ${flow.tokens!.access_token}` };
    expect((await postJson(`${emu.baseUrl}/research`, { question: 'Hunde im Büro?' }, bearer)).status).toBe(202);
    const res = await http(`${emu.adminUrl}/overview`, { headers: { authorization: `Bearer ${emu.adminToken}` } });
    expect(res.status).toBe(200);
    const snap = res.json() as Overview;
    expect(snap.grants).toHaveLength(1);
    expect(snap.families[0]).toMatchObject({ status: 'active', chain: [{ generation: 1, rotated_at: null }] });
    expect(snap.research[0]).toMatchObject({ status: 'queued', question: 'Hunde im Büro?' });
    expect(snap.charges.entries).toEqual([expect.objectContaining({ route: 'POST /research', amount: 2 })]);
    expect(snap.requests.map((r) => r.path)).toContain('/research');
    // Replays are free and listed as such (kept since the emulator started).
    const keyed = { ...bearer, 'idempotency-key': 'k-1' };
    for (let i = 0; i < 2; i++) await postJson(`${emu.baseUrl}/chat/ask`, { question: 'Wer ist Luna?' }, keyed);
    const again = (await http(`${emu.adminUrl}/overview`, { headers: { authorization: `Bearer ${emu.adminToken}` } })).json() as Overview;
    expect(again.charges.replays).toEqual([expect.objectContaining({ route: 'POST /chat/ask', key: 'k-1', grant_id: snap.grants[0]!.id })]);
    expect(again.charges.entries.filter((e) => e.route === 'POST /chat/ask')).toHaveLength(1);
    expect(res.text).not.toContain(flow.tokens!.refresh_token);
    expect(res.text).not.toContain(flow.tokens!.access_token);
    expect(res.text).not.toMatch(/"(hash|handle_hash|private_jwk|d)"/);
  });
});

describe('admin API protection (stream and overview)', () => {
  it('without the admin token: 401, and nothing is streamed', async () => {
    const emu = await startEmulator();
    for (const path of ['/events', '/overview']) {
      const res = await http(`${emu.adminUrl}${path}`);
      expect(res.status).toBe(401);
      expect(res.headers['www-authenticate']).toBe('Bearer realm="agent-access-admin"');
      expect((await http(`${emu.adminUrl}${path}`, { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
    }
  });

  it('a Host that is not a loopback name is refused even when serving on all interfaces (DNS rebinding)', async () => {
    const emu = await startEmulator({ host: '0.0.0.0' });
    const port = new URL(emu.baseUrl).port;
    const auth = { authorization: `Bearer ${emu.adminToken}` };
    const evil = await http(`${emu.adminUrl}/overview`, { headers: { ...auth, host: `rebound.example:${port}` } });
    expect(evil.status).toBe(421);
    // The service itself answers any Host on 0.0.0.0; only the admin API insists.
    expect(
      (await http(`${emu.baseUrl}/.well-known/oauth-authorization-server`, { headers: { host: `rebound.example:${port}` } })).status,
    ).toBe(200);
    expect((await http(`${emu.adminUrl}/overview`, { headers: { ...auth, host: `localhost:${port}` } })).status).toBe(200);
  });

  it('a browser preflight gets no CORS answer, so a web page cannot read the stream', async () => {
    const emu = await startEmulator();
    const res = await http(`${emu.adminUrl}/events`, {
      method: 'OPTIONS',
      headers: { origin: 'http://evil.example', 'access-control-request-method': 'GET', 'access-control-request-headers': 'authorization' },
    });
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
  });
});

describe('admin decisions: POST /_admin/actions/{id}/decide', () => {
  it('refuses a bad decision (400) and an unknown action (404), and changes nothing', async () => {
    const emu = await startEmulator();
    const auth = { authorization: `Bearer ${emu.adminToken}` };
    expect((await postJson(`${emu.adminUrl}/actions/act_x/decide`, { decision: 'maybe' }, auth)).status).toBe(400);
    expect((await postJson(`${emu.adminUrl}/actions/act_x/decide`, { decision: 'approve' }, auth)).status).toBe(404);
  });

  it('a decided action cannot be decided again (409)', async () => {
    const emu = await startEmulator();
    const flow = await authorizeAndApprove(emu, { scope: 'ask workspace.write' });
    const access = await authenticate(emu.core, `Bearer ${flow.tokens!.access_token}`, 'workspace.write');
    await emu.plane.ask(access, 'Lege einen Kontakt „Anna Schmidt“ an.');
    const id = Object.keys(emu.core.state.pending_actions)[0]!;
    const auth = { authorization: `Bearer ${emu.adminToken}` };
    const first = await postJson(`${emu.adminUrl}/actions/${id}/decide`, { decision: 'reject' }, auth);
    expect(first.status).toBe(200);
    expect(first.json().action).toMatchObject({ id, status: 'rejected' });
    expect((await postJson(`${emu.adminUrl}/actions/${id}/decide`, { decision: 'approve' }, auth)).status).toBe(409);
    expect(emu.core.state.pending_actions[id]?.status).toBe('rejected');
  });
});
