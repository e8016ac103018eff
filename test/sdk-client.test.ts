/**
 * An agent on the MCP TypeScript SDK (test/fixtures/conformance/sdk-client.mjs, issue 42 point 5) against the
 * emulator, across an access-token expiry: one call at a time it refreshes and goes on; with calls in flight, the
 * SDK's own refresh runs once per call with the same refresh token, which the service treats as a replay.
 */
import { describe, expect, it } from 'vitest';
import { emulatorWithLog, moveClockAlong, refreshes, runSampleClient } from './helpers/sample-clients.js';

describe('the MCP SDK sample client across an expiry (issue 42.5)', { timeout: 60_000 }, () => {
  it('42.2 expiry: after the clock moves 16 minutes, the SDK client refreshes once (with rotation) and its calls succeed; no new consent', async () => {
    const log = await emulatorWithLog();
    moveClockAlong(log);
    const run = await runSampleClient('sdk-client.mjs', log.emulator.baseUrl);
    expect(run.code, run.stderr).toBe(0);
    expect(log.of('grant.created').map((e) => [e.data.scopes, e.data.resource])).toEqual([[['ask'], `${log.emulator.baseUrl}/mcp`]]);
    expect(refreshes(log)).toHaveLength(1);
    expect(log.of('refresh.rotated')).toHaveLength(1);
    expect(log.of('family.invalidated')).toEqual([]);
    expect(log.of('consent.approved')).toHaveLength(1);
    // The first call, and three rounds of one.
    expect(log.of('charge.recorded').filter((c) => c.data.route === 'tool ask')).toHaveLength(4);
  });

  it('42.2 parallel-expiry: MCP SDK 1.32.2 refreshes once per call in flight with the same refresh token; the second use is a replay that kills the family', async () => {
    const log = await emulatorWithLog();
    moveClockAlong(log);
    const run = await runSampleClient('sdk-client.mjs', log.emulator.baseUrl, { SDK_CLIENT_PARALLEL: '3', SDK_CLIENT_ROUNDS: '1' });
    // The three calls of the round were in flight with the expired token.
    const mcp = log.of('request.served').filter((e) => e.data.path === '/mcp');
    expect(mcp.filter((e) => e.data.status === 401).length).toBeGreaterThanOrEqual(3);
    // One refresh token presented twice: its first use rotated it, a later one replayed it (the generation rotated from).
    const rotatedFrom = log.of('refresh.rotated').map((e) => e.data.from_generation);
    const killed = log.of('family.invalidated');
    expect(killed.map((e) => e.data.reason)).toEqual(['refresh_replay']);
    expect(rotatedFrom).toContain(killed[0]!.data.replayed_generation);
    // What follows depends on how the refreshes interleave: the SDK drops its tokens and starts a new authorization
    // (which this script finishes), or its second refresh fails too and the call with it. Either way it cost the family.
    expect(run.stderr).toMatch(/sdk-client: (done|failed)/);
  });
});
