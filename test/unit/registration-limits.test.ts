import { describe, expect, it } from 'vitest';
import { DAY, MINUTE, ManualClock } from '../../src/core/state/clock.js';
import { DEFAULT_REGISTRATION_LIMITS } from '../../src/core/oauth/registration-gate.js';
import { DEFAULT_RETENTION } from '../../src/core/oauth/retention.js';
import { startInProcess } from '../helpers/emulator.js';
import { REDIRECT, authorizeAndApprove, clientMetadata, postJson, register } from '../helpers/oauth.js';

const registerRaw = (baseUrl: string, overrides: Record<string, unknown> = {}) =>
  postJson(`${baseUrl}/oauth/register`, clientMetadata(overrides));

describe('41.1: open registration is bounded (a rate per source address, a number of clients, unused clients expire)', () => {
  it('41.1: the defaults leave room for a CI suite (thousands of clients) and are bounded', () => {
    expect(DEFAULT_REGISTRATION_LIMITS.maxClients).toBeGreaterThanOrEqual(2_000);
    expect(DEFAULT_REGISTRATION_LIMITS.maxClients).toBeLessThanOrEqual(10_000);
    expect(DEFAULT_REGISTRATION_LIMITS.rate).toEqual({ limit: 600, windowMs: MINUTE });
    expect(DEFAULT_RETENTION.unusedClients).toBe(DAY);
  });

  it('41.1: RFC 7591 §3.2.2, RFC 6749 §4.1.2.1: a full client table answers 503 temporarily_unavailable with Retry-After and how to raise the cap; nothing is stored', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const emu = await startInProcess({ clock, maxClients: 3 });
    for (let i = 0; i < 3; i++) expect((await registerRaw(emu.baseUrl)).status).toBe(201);
    clock.advance(3_600_000);
    const res = await registerRaw(emu.baseUrl);
    expect(res.status).toBe(503);
    expect(res.headers['cache-control']).toBe('no-store');
    // The oldest never-used client goes a day after its registration: 23 h from now.
    expect(res.headers['retry-after']).toBe(String(23 * 3600));
    expect(res.json()).toEqual({
      error: 'temporarily_unavailable',
      error_description: expect.stringMatching(/3 clients are registered.*serve --max-clients N \(startEmulator\(\{ maxClients: N \}\)\)/),
    });
    expect(Object.keys(emu.core.state.clients)).toHaveLength(3);
    // When Retry-After has passed, there is room at once, on a manual clock too: no wait for the prune timer.
    clock.advance(23 * 3_600_000);
    expect((await registerRaw(emu.baseUrl)).status).toBe(201);
    expect(Object.keys(emu.core.state.clients)).toHaveLength(1);
  });

  it('41.1: more registrations from one address than the rate → 429 temporarily_unavailable with Retry-After on the emulator clock; the next window admits again', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const emu = await startInProcess({ clock, registrationRate: '5/min' });
    for (let i = 0; i < 5; i++) expect((await registerRaw(emu.baseUrl)).status).toBe(201);
    const res = await registerRaw(emu.baseUrl);
    expect(res.status).toBe(429);
    expect(res.headers['retry-after']).toBe('60');
    expect(res.json()).toEqual({
      error: 'temporarily_unavailable',
      error_description: expect.stringMatching(/more than 5 registrations from 127\.0\.0\.1 within 60 s.*serve --registration-rate/),
    });
    expect(Object.keys(emu.core.state.clients)).toHaveLength(5);
    clock.advance(MINUTE);
    expect((await registerRaw(emu.baseUrl)).status).toBe(201);
  });

  it('41.1: a client never used goes a day after its registration (retention unused-clients); one with a grant, or of a scenario, stays', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const emu = await startInProcess({ clock, maxClients: 3 });
    // A client a scenario (or a state file of an earlier version) holds: there on purpose, though it has no grant.
    emu.core.repo.put('clients', 'client_scenario', {
      client_id: 'client_scenario',
      client_id_issued_at: clock.now() / 1000,
      client_name: 'Aus dem Szenario',
      redirect_uris: [REDIRECT],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    });
    await emu.core.commit();
    const unused = await register(emu.baseUrl);
    const flow = await authorizeAndApprove(emu);
    expect((await registerRaw(emu.baseUrl)).status).toBe(503);
    clock.advance(DAY - 1);
    expect(emu.core.prune()).toBe(false);
    clock.advance(1);
    expect(emu.core.prune()).toBe(true);
    expect(Object.keys(emu.core.state.clients).sort()).toEqual(['client_scenario', flow.client_id].sort());
    expect(emu.core.state.clients[unused.client_id]).toBeUndefined();
    // Months later the used client is still there, and the freed place takes a new one.
    clock.advance(90 * DAY);
    emu.core.prune();
    expect(emu.core.state.clients[flow.client_id]).toBeDefined();
    expect((await registerRaw(emu.baseUrl)).status).toBe(201);
  });
});
