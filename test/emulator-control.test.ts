/**
 * Emulator control for test code and CI: the programmatic API (in-process and child), tokens without the
 * browser, and one virtual clock for everything that runs on time.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { RunningEmulator } from '../src/index.js';
import { runCli, startServe } from './helpers/cli.js';
import { scratchDir, startRunning } from './helpers/emulator.js';
import { decodeJwt, http, postJson, refresh } from './helpers/oauth.js';

const ask = (emu: RunningEmulator, token: string, headers: Record<string, string> = {}) =>
  postJson(`${emu.baseUrl}/chat/ask`, { question: 'Wann kommt der Hufschmied?' }, { authorization: `Bearer ${token}`, ...headers });

describe('startEmulator and issueTokens (the programmatic API)', () => {
  it('starts in one line on free loopback ports, and issueTokens gives real tokens without the browser', async () => {
    const emu = await startRunning();
    expect(emu.baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(emu.issuer).toBe(emu.baseUrl);
    const tokens = await emu.issueTokens({ scopes: ['ask', 'research'] });
    expect(tokens).toMatchObject({ token_type: 'Bearer', expires_in: 900, scope: 'ask research' });
    expect(decodeJwt(tokens.access_token).payload).toMatchObject({
      aud: `${emu.baseUrl}/mcp`,
      iss: emu.issuer,
      client_id: tokens.client_id,
      scope: 'ask research',
    });
    expect((await ask(emu, tokens.access_token)).status).toBe(200);
    // The refresh token is a real one: it rotates.
    const rotated = await refresh(emu.baseUrl, { client_id: tokens.client_id, refresh_token: tokens.refresh_token! });
    expect(rotated.status).toBe(200);
  });

  it('spec 2.3, 5.8: an identity token from issueTokens is refused by the API like any identity token', async () => {
    const emu = await startRunning();
    const tokens = await emu.issueTokens({ scopes: ['ask'], identity: true });
    const res = await ask(emu, tokens.access_token);
    expect(res.status).toBe(401);
    expect(res.headers['www-authenticate']).toContain('invalid_token');
  });

  it('spec 2.7: issueTokens refuses a retired or unknown scope as /authorize does (invalid_scope), an unknown client or person (404), and creates nothing', async () => {
    const emu = await startRunning();
    await expect(emu.issueTokens({ scopes: ['documents.read'] })).rejects.toMatchObject({ status: 400, body: { error: 'invalid_scope' } });
    await expect(emu.issueTokens({ scopes: ['ask', 'nope'] })).rejects.toMatchObject({ status: 400 });
    await expect(emu.issueTokens({ scopes: ['ask'], clientId: 'client_unknown' })).rejects.toMatchObject({ status: 404 });
    await expect(emu.issueTokens({ scopes: ['ask'], personId: 'person_unknown' })).rejects.toMatchObject({ status: 404 });
    // A misspelt field is refused, not dropped (which would register a new client).
    const misspelt = await postJson(
      `${emu.adminUrl}/tokens`,
      { scopes: ['ask'], clientId: 'x' },
      { authorization: `Bearer ${emu.adminToken}` },
    );
    expect(misspelt.status).toBe(400);
    expect(misspelt.json().detail).toContain('unknown field clientId');
    const snap = (await http(`${emu.adminUrl}/overview`, { headers: { authorization: `Bearer ${emu.adminToken}` } })).json();
    expect([snap.grants, snap.clients]).toEqual([[], {}]);
  });

  it('runs as a child `agent-access serve` with the same controls, and stop() ends the process', async () => {
    const emu = await startRunning({ mode: 'child', clock: 'manual' });
    const tokens = await emu.issueTokens({ scopes: ['ask'] });
    expect((await ask(emu, tokens.access_token)).status).toBe(200);
    await emu.clock.advance('16m');
    expect((await ask(emu, tokens.access_token)).status).toBe(401);
    await emu.stop();
    await expect(http(`${emu.baseUrl}/.well-known/oauth-authorization-server`)).rejects.toThrow();
  });
});

describe('one virtual clock (serve --clock manual)', () => {
  it('spec 5.4: an access token is accepted at 899 s, refused one second past 900 s, and refreshed after', async () => {
    const emu = await startRunning({ clock: 'manual' });
    const tokens = await emu.issueTokens({ scopes: ['ask'] });
    await emu.clock.advance('899s');
    expect((await ask(emu, tokens.access_token)).status).toBe(200);
    await emu.clock.advance('2s');
    const refused = await ask(emu, tokens.access_token);
    expect(refused.status).toBe(401);
    expect(refused.headers['www-authenticate']).toContain('the access token has expired');
    const renewed = await refresh(emu.baseUrl, { client_id: tokens.client_id, refresh_token: tokens.refresh_token! });
    expect(renewed.status).toBe(200);
    expect((await ask(emu, renewed.json().access_token)).status).toBe(200);
  });

  it('4.4 rule 5, 8: an idempotency key is honoured at 23 h 59 min and forgotten at 24 h', async () => {
    const emu = await startRunning({ clock: 'manual' });
    const first = await emu.issueTokens({ scopes: ['ask'] });
    const keyed = { 'idempotency-key': 'nightly-report-1' };
    const original = await ask(emu, first.access_token, keyed);
    expect(original.status).toBe(200);
    await emu.clock.advance('23h59m');
    // Tokens last 15 minutes: a new grant of the same client (the key is the client's) asks again.
    const later = await emu.issueTokens({ scopes: ['ask'], clientId: first.client_id });
    const replay = await ask(emu, later.access_token, keyed);
    expect(replay.text).toBe(original.text);
    await emu.clock.advance('1m');
    const fresh = await emu.issueTokens({ scopes: ['ask'], clientId: first.client_id });
    const again = await ask(emu, fresh.access_token, keyed);
    expect(again.status).toBe(200);
    expect(again.json().message_id).not.toBe(original.json().message_id);
    const charges = (await http(`${emu.adminUrl}/charges`, { headers: { authorization: `Bearer ${emu.adminToken}` } })).json();
    expect(charges.entries.map((e: { idempotency_key: string }) => e.idempotency_key)).toEqual(['nightly-report-1', 'nightly-report-1']);
  });

  it('spec 7, 8: the rate-limit window of a grant moves with the clock: refused at 59 s, allowed at 60 s', async () => {
    const emu = await startRunning({ clock: 'manual', rateLimit: '2/min' });
    const tokens = await emu.issueTokens({ scopes: ['ask'] });
    expect((await ask(emu, tokens.access_token)).status).toBe(200);
    expect((await ask(emu, tokens.access_token)).status).toBe(200);
    expect((await ask(emu, tokens.access_token)).status).toBe(429);
    await emu.clock.advance('59s');
    expect((await ask(emu, tokens.access_token)).status).toBe(429);
    await emu.clock.advance('1s');
    expect((await ask(emu, tokens.access_token)).status).toBe(200);
  });

  it('spec 2.5, 2.6: research and training move with the clock, and have caught up when advance() resolves', async () => {
    const emu = await startRunning({ clock: 'manual' });
    const tokens = await emu.issueTokens({ scopes: ['research', 'training.write'] });
    const bearer = { authorization: `Bearer ${tokens.access_token}` };
    const job = await postJson(`${emu.baseUrl}/research`, { question: 'Dürfen Hunde in den Stall?' }, bearer);
    const doc = await postJson(
      `${emu.baseUrl}/training`,
      { file_name: 'notiz.md', content: '# Notiz\n\nDer Hufschmied kommt am Dienstag.' },
      bearer,
    );
    expect([job.status, doc.status]).toEqual([202, 202]);
    await emu.clock.advance('10m');
    // Read through the admin overview, which does not move jobs itself: the advance did.
    const snap = (await http(`${emu.adminUrl}/overview`, { headers: { authorization: `Bearer ${emu.adminToken}` } })).json();
    expect(snap.research).toEqual([expect.objectContaining({ id: job.json().job_id, status: 'succeeded' })]);
    expect(snap.training).toEqual([expect.objectContaining({ id: doc.json().document_id, processing_step: 'indexed' })]);
  });

  it('a real-time clock cannot be advanced (409), and a bad duration is a 400 that moves nothing', async () => {
    const real = await startRunning();
    await expect(real.clock.advance('1m')).rejects.toMatchObject({ status: 409 });
    const manual = await startRunning({ clock: Date.UTC(2026, 0, 1) });
    await expect(manual.clock.advance('soon')).rejects.toMatchObject({ status: 400 });
    await expect(manual.clock.advance('300000y')).rejects.toMatchObject({ status: 400 });
    await expect(manual.clock.advance(1e300)).rejects.toMatchObject({ status: 400 });
    const extra = await postJson(
      `${manual.adminUrl}/clock/advance`,
      { by: '1m', extra: 1 },
      { authorization: `Bearer ${manual.adminToken}` },
    );
    expect(extra.status).toBe(400);
    expect(await manual.clock.now()).toBe(Date.UTC(2026, 0, 1));
    expect(await manual.clock.advance('24h')).toBe(Date.UTC(2026, 0, 2));
  });

  it('agent-access clock now / advance move the clock of `serve --clock manual`', async () => {
    const dir = await scratchDir();
    const state = join(dir, 'state.json');
    const s = await startServe(['--state', state, '--clock', 'manual']);
    try {
      expect(s.ready).toMatchObject({ clock: 'manual' });
      const before = JSON.parse((await runCli(['clock', 'now', '--state', state, '--json'])).stdout) as { now: number; mode: string };
      expect(before.mode).toBe('manual');
      const moved = await runCli(['clock', 'advance', '16m', '--state', state]);
      expect(moved.code).toBe(0);
      expect(moved.stdout).toBe(`${new Date(before.now + 16 * 60_000).toISOString()} (manual clock)\n`);
      const combined = await runCli(['clock', 'advance', '23h59m', '--state', state]);
      expect(combined.code, combined.stderr).toBe(0);
      expect(combined.stdout).toBe(`${new Date(before.now + 16 * 60_000 + (23 * 60 + 59) * 60_000).toISOString()} (manual clock)\n`);
      const bad = await runCli(['clock', 'advance', 'later', '--state', state]);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain('"later" is not a duration');
      expect(bad.stderr).toContain('1h30m, 23h59m');
    } finally {
      await s.stop();
    }
    const real = await startServe(['--state', state]);
    try {
      const refused = await runCli(['clock', 'advance', '16m', '--state', state]);
      expect(refused.code).toBe(8);
      expect(refused.stderr).toContain('the clock is real time; start the emulator with --clock manual');
    } finally {
      await real.stop();
    }
  });
});
