/**
 * The deliberately faulty sample client (test/fixtures/conformance/faulty-client.mjs, issue 42 point 5): without
 * switches it completes its workload against an emulator as a correct client does; each switch shows in its traffic.
 * The conformance scenarios grade it elsewhere; here only what the emulator saw of it is asserted.
 */
import { describe, expect, it } from 'vitest';
import type { FaultSpec } from '../src/core/emulation/fault-spec.js';
import {
  emulatorWithLog,
  moveClockAlong,
  refreshes,
  revokeAfterFirstAsk,
  runFaultyClientHere,
  type Run,
} from './helpers/sample-clients.js';

/** In this process: the client as a process is run by conformance-proofs.test.ts and the sdk-client tests. */
const runClient = (baseUrl: string, defects: string[] = [], env: Record<string, string> = {}): Promise<Run> =>
  runFaultyClientHere(baseUrl, { FAULTY_CLIENT_DEFECTS: defects.join(','), ...env });

describe('the faulty sample client, without defects (issue 42.5)', { timeout: 60_000 }, () => {
  it('42.5 a correct client: discovery, registration, PKCE S256 with resource and minimal scopes; after expiry one refresh for three calls in flight, no replay; polls 1 s apart; exit 0', async () => {
    const log = await emulatorWithLog();
    // Expired once the second ask is charged: the three asks after it are in flight together.
    moveClockAlong(log, { expireAfterAsks: 2 });
    const run = await runClient(log.emulator.baseUrl);
    expect(run.code, run.stderr).toBe(0);
    const served = log.of('request.served').map((e) => `${e.data.method} ${e.data.path} ${e.data.status}`);
    expect(served.slice(0, 2)).toEqual([
      'GET /.well-known/oauth-protected-resource/mcp 200',
      'GET /.well-known/oauth-authorization-server 200',
    ]);
    expect(log.of('grant.created').map((e) => [e.data.scopes, e.data.resource])).toEqual([
      [['ask', 'research'], `${log.emulator.baseUrl}/mcp`],
    ]);
    // Three asks in flight with the expired token: 401 each, one refresh between them, the family alive.
    expect(served.filter((s) => s === 'POST /chat/ask 401')).toHaveLength(3);
    expect(refreshes(log)).toHaveLength(1);
    expect(log.of('family.invalidated')).toEqual([]);
    // Every charged call carried a key; nine asks and one research, each charged once.
    const charges = log.of('charge.recorded');
    expect(charges.map((c) => c.data.route).sort()).toEqual([...Array(9).fill('POST /chat/ask'), 'POST /research'].sort());
    expect(charges.every((c) => typeof c.data.idempotency_key === 'string')).toBe(true);
    const polls = log.polls();
    expect(polls.length).toBeGreaterThanOrEqual(2);
    for (let i = 1; i < polls.length; i++) expect(polls[i]!.seen - polls[i - 1]!.seen).toBeGreaterThanOrEqual(900);
    expect(run.stdout).toMatch(/Recherche: /);
  });

  it('42.2 lost-answer and server-error: the correct client retries a lost answer and a 503 with the same key; each operation is charged once', async () => {
    const log = await emulatorWithLog({
      faults: [
        { kind: 'drop_response', route: 'POST /chat/ask', count: 1 },
        { kind: 'server_error', route: 'POST /research', status: 503, count: 1 },
      ],
    });
    moveClockAlong(log);
    const run = await runClient(log.emulator.baseUrl);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toMatch(/answer was lost/);
    const charges = log.of('charge.recorded');
    expect(charges.filter((c) => c.data.route === 'POST /chat/ask')).toHaveLength(9);
    expect(charges.filter((c) => c.data.route === 'POST /research')).toHaveLength(1);
    // The lost answer's retry got the stored answer.
    expect(log.of('idempotency.replayed').map((e) => e.data.key)).toEqual([charges[0]!.data.idempotency_key]);
  });

  it('42.2 revoked: after the grant is revoked the correct client tries one refresh, is refused, authorizes once more and finishes', async () => {
    const log = await emulatorWithLog();
    moveClockAlong(log);
    revokeAfterFirstAsk(log);
    const run = await runClient(log.emulator.baseUrl);
    expect(run.code, run.stderr).toBe(0);
    const token = log.of('request.served').filter((e) => e.data.path === '/oauth/token');
    expect(token.map((e) => e.data.status)).toEqual([200, 400, 200]);
    expect(log.of('grant.created')).toHaveLength(2);
  });

  it('42.2 consent-denied: the correct client exits 1 after one authorization and calls no API', async () => {
    const log = await emulatorWithLog({ consent: { decision: 'deny' } });
    const run = await runClient(log.emulator.baseUrl);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/authorization refused: access_denied/);
    expect(log.of('consent.denied')).toHaveLength(1);
    expect(log.of('request.served').filter((e) => e.data.path === '/chat/ask')).toEqual([]);
  });
});

describe('the faulty sample client: each switch shows in its traffic (issue 42.5)', { timeout: 60_000 }, () => {
  it('no-pkce: the authorization request is refused (invalid_request redirect); no tokens, exit 1', async () => {
    const log = await emulatorWithLog();
    const run = await runClient(log.emulator.baseUrl, ['no-pkce']);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/authorization refused: invalid_request/);
    expect(log.of('tokens.issued')).toEqual([]);
  });

  it('post-retry-without-key: after a 503 on POST /research the retry carries no key (nor does any POST)', async () => {
    const faults: FaultSpec[] = [{ kind: 'server_error', route: 'POST /research', status: 503, count: 1 }];
    const faulty = await emulatorWithLog({ faults });
    moveClockAlong(faulty);
    expect((await runClient(faulty.emulator.baseUrl, ['post-retry-without-key'])).code).toBe(0);
    const served = faulty.of('request.served').filter((e) => e.data.path === '/research');
    expect(served.map((e) => e.data.status)).toEqual([503, 202]);
    const research = faulty.of('charge.recorded').filter((c) => c.data.route === 'POST /research');
    expect(research.map((c) => c.data.idempotency_key)).toEqual([null]);
    expect(faulty.of('charge.recorded').every((c) => c.data.idempotency_key === null)).toBe(true);
  });

  it('parallel-refresh: the three calls in flight refresh with one refresh token and the replay kills the family; an expiry met by one call goes well', async () => {
    const log = await emulatorWithLog();
    moveClockAlong(log, { expireAfterAsks: 2 });
    const run = await runClient(log.emulator.baseUrl, ['parallel-refresh']);
    expect(run.stderr).toMatch(/defects on: parallel-refresh/);
    expect(log.of('family.invalidated').map((e) => e.data.reason)).toContain('refresh_replay');

    const single = await emulatorWithLog();
    moveClockAlong(single);
    expect((await runClient(single.emulator.baseUrl, ['parallel-refresh'])).code).toBe(0);
    expect(refreshes(single)).toHaveLength(1);
    expect(single.of('family.invalidated')).toEqual([]);
  });

  it('hot-poll: polls follow each other without waiting', async () => {
    // The job never finishes (the clock stands still): how often each client polls within 1.5 s of real time. The rate
    // limit is out of the way: its window runs on the standing clock, and a hot loop would meet it.
    const log = await emulatorWithLog({ rateLimit: '100000/min' });
    const calm = await emulatorWithLog({ rateLimit: '100000/min' });
    const env = { FAULTY_CLIENT_RESEARCH_WAIT_MS: '1500' };
    // Both wait out the same 1.5 s of real time, each against its own emulator: together.
    const [hot, calmRun] = await Promise.all([
      runClient(log.emulator.baseUrl, ['hot-poll'], env),
      runClient(calm.emulator.baseUrl, [], env),
    ]);
    expect(hot.code).toBe(1);
    expect(log.polls().length).toBeGreaterThan(5);
    expect(calmRun.code).toBe(1);
    expect(calm.polls().length).toBeLessThanOrEqual(2);
  });

  it('unchecked-sources: sources[0].title read blindly crashes on sources of another shape; the correct client reads them', async () => {
    // Seed 2 gives the first ask its sources renamed (`name`, no `title`): a shape the spec allows ("element shape not shown").
    const faulty = await emulatorWithLog({ seed: 2 });
    moveClockAlong(faulty);
    const crashed = await runClient(faulty.emulator.baseUrl, ['unchecked-sources']);
    expect(crashed.code).toBe(1);
    expect(crashed.stderr).toMatch(/TypeError: Cannot read properties of undefined \(reading 'trim'\)/);
    const asks = faulty.of('request.served').filter((e) => e.data.path === '/chat/ask');
    expect(asks.map((e) => [e.data.status, e.data.variant])).toEqual([[200, expect.stringContaining('ask.sources=renamed')]]);
    const correct = await emulatorWithLog({ seed: 2 });
    moveClockAlong(correct);
    expect((await runClient(correct.emulator.baseUrl)).code).toBe(0);
  });

  it('ignore-retry-after: after a 429 with Retry-After: 2 the faulty client asks again at once; the correct one waits 2 s', async () => {
    const faults: FaultSpec[] = [{ kind: 'rate_limit', route: 'POST /chat/ask', retry_after: 2, count: 2 }];
    const firstThree = async (defects: string[]) => {
      const log = await emulatorWithLog({ faults });
      moveClockAlong(log);
      await runClient(log.emulator.baseUrl, defects);
      const asks = log.of('request.served').filter((e) => e.data.path === '/chat/ask');
      expect(asks.slice(0, 3).map((e) => e.data.status)).toEqual([429, 429, 200]);
      return asks[2]!.seen - asks[0]!.seen;
    };
    // Two emulators and two clients that share nothing; the correct one mostly waits, so they run together.
    const [faulty, correct] = await Promise.all([firstThree(['ignore-retry-after']), firstThree([])]);
    expect(faulty).toBeLessThan(2_000);
    expect(correct).toBeGreaterThanOrEqual(3_800);
  });

  it('retry-revoked-refresh: a refresh token refused with invalid_grant is presented again', async () => {
    const log = await emulatorWithLog();
    moveClockAlong(log);
    revokeAfterFirstAsk(log);
    await runClient(log.emulator.baseUrl, ['retry-revoked-refresh']);
    const refused = log.of('request.served').filter((e) => e.data.path === '/oauth/token' && e.data.status === 400);
    expect(refused.length).toBeGreaterThan(1);
  });

  it('all-scopes: every supported scope is requested; no-resource: an identity token the API refuses, exit 1 without a loop', async () => {
    const all = await emulatorWithLog();
    moveClockAlong(all);
    await runClient(all.emulator.baseUrl, ['all-scopes']);
    expect(all.of('grant.created')[0]!.data.scopes).toEqual(
      expect.arrayContaining(['ask', 'research', 'training.write', 'workspace.write']),
    );

    const identity = await emulatorWithLog();
    const run = await runClient(identity.emulator.baseUrl, ['no-resource']);
    expect(run.code).toBe(1);
    expect(identity.of('grant.created').map((e) => e.data.resource)).toEqual([null]);
    const asks = identity.of('request.served').filter((e) => e.data.path === '/chat/ask');
    expect(asks.map((e) => e.data.status)).toEqual([401, 401, 401]);
  });
});
