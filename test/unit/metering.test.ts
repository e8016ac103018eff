import { describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { AgentPlane } from '../../src/core/resources/agent-plane.js';
import { HOUR, ManualClock } from '../../src/core/state/clock.js';
import { Core } from '../../src/core/core.js';
import { sha256 } from '../../src/core/state/crypto.js';
import type { AppEvent } from '../../src/core/state/events.js';
import { idempotencyId } from '../../src/core/state/idempotency.js';
import { issueTokensWithoutConsent } from '../../src/core/oauth/issue-tokens.js';
import type { Charged } from '../../src/core/resources/metering.js';
import { RateLimitedError } from '../../src/core/state/rate-limit.js';
import { ProblemError } from '../../src/core/state/errors.js';
import { authenticate, checkScope } from '../../src/core/oauth/resource-guard.js';
import { ResourceService, type Sleep } from '../../src/core/resources/resource-service.js';
import { emptyWorkspace } from '../../src/core/resources/workspace.js';
import { buildApiApp } from '../../src/server/api-app.js';
import { buildServer } from '../../src/server/mcp-server.js';
import { MemoryPersistence } from '../../src/store/memory-persistence.js';

const START = Date.UTC(2026, 0, 15, 9);

/** A sleep that waits until the test lets it go: real-time waits of the core, on the test's command. */
function manualSleep() {
  const waits: Array<{ ms: number; done: () => void }> = [];
  const sleep: Sleep = (ms) => {
    let wait!: { ms: number; done: () => void };
    const done = new Promise<void>((resolve) => {
      wait = { ms, done: resolve };
      waits.push(wait);
    });
    return { done, cancel: () => void waits.splice(waits.indexOf(wait), 1) };
  };
  return { sleep, waits };
}

async function setup(options: { limit?: number; askTimeoutMs?: number; askLatencyMs?: number } = {}) {
  const clock = new ManualClock(START);
  const core = await Core.open({
    clock,
    persistence: new MemoryPersistence(),
    persons: [{ id: 'person_erika', name: 'Erika', email: 'erika@example.invalid', default: true }],
  });
  core.setUrls({ baseUrl: 'http://127.0.0.1:1', authUrl: 'http://127.0.0.1:2' });
  const { sleep, waits } = manualSleep();
  const workspace = emptyWorkspace();
  const resources = new ResourceService(core, {
    workspace,
    knowledge: [
      {
        id: 'kb_hufschmied',
        title: 'Hufschmied',
        file_name: 'hufschmied.md',
        content: '# Hufschmied\n\nDer Hufschmied kommt jeden zweiten Dienstag in den Stall.',
      },
    ],
    sleep,
    rateLimit: { limit: options.limit ?? 100, windowMs: 60_000 },
    askTimeoutMs: options.askTimeoutMs,
    askLatencyMs: options.askLatencyMs,
  });
  const tokens = await issueTokensWithoutConsent(core, { scopes: ['ask', 'research', 'training.write'] });
  const access = () => authenticate(core, `Bearer ${tokens.access_token}`, null);
  const events: AppEvent[] = [];
  core.events.subscribe((event) => void events.push(event));
  const charges = () => events.filter((e) => e.name === 'charge.recorded');
  return { clock, core, resources, workspace, tokens, access, events, charges, waits };
}

/** An operation that counts its runs and answers a new object each time, charged 1 AKh. */
const counting = () => {
  let runs = 0;
  const operation = async (): Promise<Charged<{ n: number }>> => ({ value: { n: ++runs }, charge: 1 });
  return { operation, runs: () => runs };
};

describe('metered call: spec 4.4 rule 5 (idempotency)', () => {
  it('4.4 rule 5: same key and same body → the stored result, replayed, the operation not run again, nothing charged', async () => {
    const { resources, access, charges, events } = await setup();
    const op = counting();
    const call = { meter: 'POST /chat/ask', key: 'k-1', body: '{"question":"Hufschmied?"}' };
    const first = await resources.meter.run(await access(), call, op.operation);
    const again = await resources.meter.run(await access(), call, op.operation);
    expect(first).toEqual({ value: { n: 1 }, replayed: false });
    expect(again).toEqual({ value: { n: 1 }, replayed: true });
    expect(op.runs()).toBe(1);
    expect(charges()).toHaveLength(1);
    expect(events.filter((e) => e.name === 'idempotency.replayed')).toHaveLength(1);
  });

  it('4.4 rule 5: same key and a different body → idempotency_key_reused (409), nothing run or charged', async () => {
    const { resources, access, charges } = await setup();
    const op = counting();
    await resources.meter.run(await access(), { meter: 'POST /chat/ask', key: 'k-2', body: '{"question":"a"}' }, op.operation);
    await expect(
      resources.meter.run(await access(), { meter: 'POST /chat/ask', key: 'k-2', body: '{"question":"b"}' }, op.operation),
    ).rejects.toMatchObject({ code: 'idempotency_key_reused' });
    expect(op.runs()).toBe(1);
    expect(charges()).toHaveLength(1);
  });

  it('4.4 rule 5: no key → each call is a new request and a new charge', async () => {
    const { resources, access, charges } = await setup();
    const op = counting();
    for (let i = 0; i < 3; i++)
      await resources.meter.run(await access(), { meter: 'POST /chat/ask', key: undefined, body: '{}' }, op.operation);
    expect(op.runs()).toBe(3);
    expect(charges().map((e) => e.data)).toMatchObject([{ idempotency_key: null }, { idempotency_key: null }, { idempotency_key: null }]);
  });

  it('spec 8: a key is honoured until just before 24 h on the clock, and runs anew (and is charged) at 24 h', async () => {
    const { clock, resources, access, charges } = await setup();
    const op = counting();
    const call = { meter: 'POST /research', key: 'day', body: '{}' };
    // One admitted caller throughout: its access token's expiry is the guard's business, not the meter's.
    const caller = await access();
    await resources.meter.run(caller, call, op.operation);
    clock.advance(24 * HOUR - 1);
    expect(await resources.meter.run(caller, call, op.operation)).toMatchObject({ value: { n: 1 }, replayed: true });
    clock.advance(1);
    expect(await resources.meter.run(caller, call, op.operation)).toMatchObject({ value: { n: 2 }, replayed: false });
    expect(charges()).toHaveLength(2);
  });

  it('4.4 rule 5 (the IETF draft on duplicates): a second use of a key while the first still runs → idempotency_key_in_flight; the first is answered', async () => {
    const { resources, access } = await setup();
    let release!: () => void;
    const slow = async (): Promise<Charged<{ ok: true }>> => {
      await new Promise<void>((r) => (release = r));
      return { value: { ok: true } };
    };
    const call = { meter: 'POST /training', key: 'busy', body: '{}' };
    const first = resources.meter.run(await access(), call, slow);
    await expect(resources.meter.run(await access(), call, slow)).rejects.toMatchObject({ code: 'idempotency_key_in_flight' });
    release();
    expect(await first).toEqual({ value: { ok: true }, replayed: false });
    expect(await resources.meter.run(await access(), call, slow)).toMatchObject({ replayed: true });
  });

  it('4.4 rule 5: a refused operation stores nothing and is not charged; the key may be used again', async () => {
    const { core, resources, access, charges } = await setup();
    const call = { meter: 'POST /chat/ask', key: 'retry', body: '{}' };
    await expect(
      resources.meter.run(await access(), call, async () => {
        throw new ProblemError('ask_timeout', 'abandoned');
      }),
    ).rejects.toBeInstanceOf(ProblemError);
    expect(core.state.idempotency).toEqual({});
    expect(charges()).toHaveLength(0);
    expect(await resources.meter.run(await access(), call, counting().operation)).toMatchObject({ value: { n: 1 }, replayed: false });
  });

  it('a malformed key (not 1–255 printable ASCII) → invalid_idempotency_key, whichever transport sent it', async () => {
    const { resources, access } = await setup();
    for (const key of ['', 'x'.repeat(256), 'a\tb', 'schlüssel']) {
      await expect(resources.meter.run(await access(), { meter: 'tool ask', key, body: '{}' }, counting().operation)).rejects.toMatchObject(
        { code: 'invalid_idempotency_key' },
      );
    }
  });

  it('a record of an older state file (the serialised response) replays as the same object, and REST sends the same bytes', async () => {
    const { core, resources, access, tokens } = await setup();
    const first = { answer: 'Der Hufschmied kommt dienstags.', sources: [], message_id: 'msg_old' };
    const body = '{"question":"Hufschmied?"}';
    const id = idempotencyId(tokens.client_id, 'person_erika', 'POST /chat/ask', 'old');
    core.repo.put('idempotency', id, {
      client_id: tokens.client_id,
      route: 'POST /chat/ask',
      key: 'old',
      fingerprint: sha256(body),
      created_at: START,
      expires_at: START + 24 * HOUR,
      response: { status: 200, content_type: 'application/json; charset=utf-8', body: JSON.stringify(first) },
    });
    expect(await resources.meter.run(await access(), { meter: 'POST /chat/ask', key: 'old', body }, counting().operation)).toEqual({
      value: first,
      replayed: true,
    });
    const app = await restApp(core, resources);
    const res = await app.inject({
      method: 'POST',
      url: '/chat/ask',
      headers: { authorization: `Bearer ${tokens.access_token}`, 'content-type': 'application/json', 'idempotency-key': 'old' },
      payload: body,
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(res.body).toBe(JSON.stringify(first));
    await app.close();
  });
});

describe('metered call: spec 1 (charges)', () => {
  it('spec 1: an ask and a research job are charged once per metered success at their prices; training and polling are free', async () => {
    const { clock, resources, access, charges } = await setup();
    const ask = await resources.meter.run(await access(), { meter: 'POST /chat/ask', key: undefined, body: '' }, async () =>
      resources.ask(await access(), 'Wann kommt der Hufschmied?'),
    );
    expect(ask.value).toMatchObject({ sources: [{ id: 'kb_hufschmied' }] });
    const job = await resources.meter.run(await access(), { meter: 'POST /research', key: 'r', body: '' }, async () =>
      resources.startResearch(await access(), 'Hufschmied'),
    );
    await resources.meter.run(await access(), { meter: 'POST /research', key: 'r', body: '' }, async () =>
      resources.startResearch(await access(), 'Hufschmied'),
    );
    await resources.meter.run(await access(), { meter: 'POST /training', key: undefined, body: '' }, async () =>
      resources.startTraining(await access(), 'notiz.md', '# Notiz'),
    );
    clock.advance(10_000);
    expect((await resources.researchView(await access(), (job.value as { job_id: string }).job_id)).value).toMatchObject({
      status: 'succeeded',
    });
    expect(charges().map((e) => [e.data.route, e.data.amount])).toEqual([
      ['POST /chat/ask', 0.1],
      ['POST /research', 2],
    ]);
  });

  it('spec 4.4 rule 2: an ask past its timeout is refused as ask_timeout and not charged; the core waits only through the injected sleep', async () => {
    const { resources, access, charges, waits } = await setup({ askTimeoutMs: 50, askLatencyMs: 400 });
    const asked = resources.meter.run(await access(), { meter: 'POST /chat/ask', key: undefined, body: '' }, async () =>
      resources.ask(await access(), 'Hufschmied?'),
    );
    await settledUntil(() => waits.length === 2);
    expect(waits.map((w) => w.ms).sort((a, b) => a - b)).toEqual([50, 400]);
    waits.find((w) => w.ms === 50)!.done();
    await expect(asked).rejects.toMatchObject({ code: 'ask_timeout' });
    expect(charges()).toHaveLength(0);
  });
});

/** Lets queued promise jobs run until `ready` holds (no timers: the core's waits are the test's). */
async function settledUntil(ready: () => boolean): Promise<void> {
  for (let i = 0; i < 100 && !ready(); i++) await new Promise((r) => setImmediate(r));
  expect(ready()).toBe(true);
}

describe('metered call: spec 7, 8 (rate limit)', () => {
  it('spec 7, 8: over the limit → RateLimitedError whose reset (Retry-After) counts down on the clock; rate_limit.exceeded is published once per refusal', async () => {
    const { clock, resources, access, events } = await setup({ limit: 2 });
    const gate = { scope: 'ask', route: 'POST /chat/ask', meter: 'POST /chat/ask' };
    expect(resources.meter.admit(await access(), gate)).toEqual({ limit: 2, remaining: 1, reset: 60 });
    clock.advance(15_000);
    expect(resources.meter.admit(await access(), gate)).toEqual({ limit: 2, remaining: 0, reset: 45 });
    clock.advance(5_500);
    const refusedAccess = await access();
    const error = (() => {
      try {
        return resources.meter.admit(refusedAccess, gate);
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(RateLimitedError);
    expect((error as RateLimitedError).state).toEqual({ limit: 2, remaining: 0, reset: 40 });
    expect(events.filter((e) => e.name === 'rate_limit.exceeded').map((e) => e.data)).toEqual([
      {
        client_id: refusedAccess.client_id,
        grant_id: refusedAccess.grant.id,
        route: 'POST /chat/ask',
        arrival: expect.any(Number),
        retry_after: 40,
      },
    ]);
    clock.advance(40_000);
    expect(resources.meter.admit(await access(), gate)).toEqual({ limit: 2, remaining: 1, reset: 60 });
  });

  it('spec 5.5: a scope the token lacks is a 403 insufficient_scope before the rate limit counts', async () => {
    const { core, resources, events } = await setup({ limit: 1 });
    const narrow = await issueTokensWithoutConsent(core, { scopes: ['ask'] });
    const access = await authenticate(core, `Bearer ${narrow.access_token}`, null);
    expect(() => checkScope(core, access, 'research', 'the tool "start_research"', 'POST /mcp')).toThrow(
      /the tool "start_research" needs scope "research"/,
    );
    expect(events.filter((e) => e.name === 'access.refused').map((e) => e.data)).toEqual([
      {
        client_id: access.client_id,
        grant_id: access.grant.id,
        family_id: access.claims.family_id,
        status: 403,
        reason: 'insufficient_scope',
        where: 'POST /mcp',
      },
    ]);
    expect(resources.meter.admit(access, { scope: 'ask', route: 'POST /chat/ask', meter: 'POST /chat/ask' })).toMatchObject({
      remaining: 0,
    });
  });
});

async function restApp(core: Core, resources: ResourceService) {
  const app = await buildApiApp(core, { checkHost: false, port: () => 1, resources });
  await app.ready();
  return app;
}

async function mcpClient(core: Core, resources: ResourceService, workspace: ReturnType<typeof emptyWorkspace>, token: string) {
  const access = await authenticate(core, `Bearer ${token}`, null);
  const server = buildServer(
    access,
    resources,
    new AgentPlane(core, resources, workspace),
    (e) => {
      throw e;
    },
    () => {
      throw new Error('an in-memory transport has no connection to lose');
    },
  );
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: 'unit', version: '1' });
  await client.connect(clientSide);
  return client;
}

describe('metered call: spec 1, 4.5 (the same reach on both planes)', () => {
  it('spec 1, 4.5: REST and MCP get the same domain results and refusals, each in its own form', async () => {
    const { core, resources, workspace, tokens } = await setup();
    const app = await restApp(core, resources);
    const client = await mcpClient(core, resources, workspace, tokens.access_token);
    const headers = { authorization: `Bearer ${tokens.access_token}`, 'content-type': 'application/json' };

    const rest = await app.inject({ method: 'POST', url: '/chat/ask', headers, payload: { question: 'Wann kommt der Hufschmied?' } });
    const tool = await client.callTool({ name: 'ask', arguments: { question: 'Wann kommt der Hufschmied?' } });
    expect(rest.statusCode).toBe(200);
    const { message_id: restId, ...restAnswer } = rest.json();
    const { message_id: toolId, outcome, ...toolAnswer } = tool.structuredContent as Record<string, unknown>;
    expect(outcome).toBe('answered');
    expect(toolAnswer).toEqual(restAnswer);
    expect([restId, toolId]).toEqual([expect.stringMatching(/^msg_/), expect.stringMatching(/^msg_/)]);

    const started = await app.inject({ method: 'POST', url: '/research', headers, payload: { question: 'Hufschmied' } });
    const toolStarted = await client.callTool({ name: 'start_research', arguments: { question: 'Hufschmied' } });
    expect(started.statusCode).toBe(202);
    expect(Object.keys(toolStarted.structuredContent as object)).toEqual(Object.keys(started.json()));
    expect(toolStarted.structuredContent).toMatchObject({ status: 'queued' });

    const missing = await app.inject({ method: 'GET', url: '/research/job_nope', headers });
    const toolMissing = await client.callTool({ name: 'get_research', arguments: { job_id: 'job_nope' } });
    expect([missing.statusCode, missing.json().type]).toEqual([404, 'urn:agent-access:error:research_job_not_found']);
    expect(toolMissing).toMatchObject({
      isError: true,
      structuredContent: { error: 'research_job_not_found', status: 404, detail: missing.json().detail },
    });

    const blank = await app.inject({ method: 'POST', url: '/research', headers, payload: { question: '   ' } });
    const toolBlank = await client.callTool({ name: 'start_research', arguments: { question: '   ' } });
    expect([blank.statusCode, blank.json().type]).toEqual([400, 'urn:agent-access:error:invalid_request']);
    expect(toolBlank).toMatchObject({ isError: true, structuredContent: { error: 'invalid_request', status: 400 } });

    // Charged alike: an ask and a research job on each plane, under each plane's route name.
    expect(core.state.charges.count).toBe(4);
    await client.close();
    await app.close();
  });

  it('4.4 rule 5: a replay renders the stored result as the first answer was rendered, on each plane', async () => {
    const { core, resources, workspace, tokens } = await setup();
    const app = await restApp(core, resources);
    const client = await mcpClient(core, resources, workspace, tokens.access_token);
    const send = () =>
      app.inject({
        method: 'POST',
        url: '/training',
        headers: { authorization: `Bearer ${tokens.access_token}`, 'content-type': 'application/json', 'idempotency-key': 't' },
        payload: '{"file_name":"a.md","content":"# A"}',
      });
    const [a, b] = [await send(), await send()];
    expect([a.statusCode, b.statusCode]).toEqual([202, 202]);
    expect(b.body).toBe(a.body);
    const call = () =>
      client.callTool({ name: 'add_training_document', arguments: { file_name: 'b.md', content: '# B', idempotency_key: 't' } });
    expect(await call()).toEqual(await call());
    expect(Object.keys(core.state.training_documents)).toHaveLength(2);
    await client.close();
    await app.close();
  });
});
