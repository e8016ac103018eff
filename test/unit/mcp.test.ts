/**
 * The agent plane at `{base_url}/mcp` (spec 1, 2.7, 4.4 rule 1, 4.5, 5.8) with the MCP TypeScript SDK's own
 * Client and StreamableHTTPClientTransport over the emulator's HTTP routes in this process (no socket), including the SDK's OAuth flow: from the first 401,
 * through discovery, registration and the consent form, to tool calls. The tools run under each protocol version
 * (MCP_VERSIONS): SDK 1.x under 2025-11-25, SDK 2 pinned to 2026-07-28. What a state file keeps is in test/mcp.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { ManualClock, SECOND } from '../../src/core/state/clock.js';
import { listGrants, revokeGrant } from '../../src/core/oauth/grants-admin.js';
import { startInProcess } from '../helpers/emulator.js';
import { MCP_VERSIONS, call, connectWithOAuth, decide, type Structured } from '../helpers/mcp-client.js';
import { Browser, authorizeAndApprove, authorizeUrl, bearer, http, pkce, register } from '../helpers/oauth.js';
import { postMcp, toolCall } from '../helpers/rest.js';

const FAST_JOBS = { researchQueueMs: 200, researchRunMs: 500, trainingStepMs: 100 };

describe('the MCP server at /mcp: discovery and the guard (RFC 9728, MCP authorization)', () => {
  it('every unauthenticated request to /mcp, GET included, gets 401 with resource_metadata and scope', async () => {
    const emulator = await startInProcess();
    for (const method of ['GET', 'POST', 'DELETE', 'PUT', 'PATCH']) {
      const res = await http(`${emulator.baseUrl}/mcp`, {
        method,
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        ...(method === 'POST' ? { body: '{"jsonrpc":"2.0","id":1,"method":"tools/list"}' } : {}),
      });
      expect(res.status, method).toBe(401);
      expect(res.headers['www-authenticate']).toBe(
        `Bearer resource_metadata="${emulator.baseUrl}/.well-known/oauth-protected-resource/mcp", scope="ask"`,
      );
    }
  });

  it('the SDK OAuth client goes from the first 401 to a tool list: resource={base_url}/mcp, PKCE S256, consent', async () => {
    const emulator = await startInProcess();
    const { client, provider } = await connectWithOAuth(emulator, 'ask');
    expect(provider.authorizationUrl!.searchParams.get('resource')).toBe(`${emulator.baseUrl}/mcp`);
    expect(provider.authorizationUrl!.searchParams.get('code_challenge_method')).toBe('S256');
    expect(provider.authorizationUrl!.searchParams.get('scope')).toBe('ask'); // from the 401 challenge
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([
      'add_training_document',
      'ask',
      'continue_ask',
      'get_research',
      'get_training_document',
      'get_training_document_url',
      'start_research',
    ]);
    for (const tool of tools) {
      expect(tool.description, tool.name).toMatch(/[äöüß]|\b(der|die|das|und)\b/); // German
      expect(tool.inputSchema.type).toBe('object');
    }
    expect(tools.find((t) => t.name === 'ask')!.inputSchema.required).toEqual(['question']);
    await client.close();
  });

  it('spec 4.4 rule 6, 9: the retired per-kind read tools are not listed, and calling one is refused', async () => {
    const emulator = await startInProcess();
    const { client } = await connectWithOAuth(emulator, 'ask');
    const { tools } = await client.listTools();
    expect(tools.some((t) => /_(list|get)$/.test(t.name))).toBe(false);
    await expect(client.callTool({ name: 'contacts_list', arguments: {} })).rejects.toThrow(/retired for agent tokens/);
    await client.close();
  });

  it('spec 5.8: an identity token (no resource) is refused with 401 invalid_token', async () => {
    const emulator = await startInProcess();
    const { tokens } = await authorizeAndApprove(emulator, { resource: null });
    const res = await postMcp(emulator.baseUrl, tokens!.access_token, { jsonrpc: '2.0', id: 1, method: 'tools/list' });
    expect(res.status).toBe(401);
    expect(res.headers['www-authenticate']).toMatch(/error="invalid_token", error_description="identity token refused/);
  });

  it('MCP authorization: a tool called without its scope answers 403 insufficient_scope naming the scope', async () => {
    const emulator = await startInProcess();
    const { tokens } = await authorizeAndApprove(emulator, { scope: 'ask' });
    const res = await postMcp(emulator.baseUrl, tokens!.access_token, toolCall('start_research', { question: 'Onboarding?' }, 7));
    expect(res.status).toBe(403);
    const challenge = res.headers['www-authenticate'] as string;
    expect(challenge).toMatch(/^Bearer error="insufficient_scope", /);
    expect(challenge).toContain(' scope="research"');
    expect(challenge).toContain(`resource_metadata="${emulator.baseUrl}/.well-known/oauth-protected-resource/mcp"`);
    expect(Object.keys(emulator.core.state.research_jobs)).toHaveLength(0);
  });

  it('spec 3.3, 5.7: a grant revoked by the person is refused on the next call', async () => {
    const emulator = await startInProcess();
    const { client, provider } = await connectWithOAuth(emulator, 'ask');
    expect((await call(client, 'ask', { question: 'Wann kommt der Hufschmied?' })).data.outcome).toBe('answered');
    const token = provider.tokens()!.access_token;
    const [grant] = listGrants(emulator.core);
    await revokeGrant(emulator.core, grant!.id, 'person');
    // The SDK client gets 401, tries its refresh token, and is refused there too (invalid_grant).
    provider.redirectToAuthorization = async () => undefined;
    await expect(client.callTool({ name: 'ask', arguments: { question: 'Und danach?' } })).rejects.toMatchObject({
      name: 'InvalidGrantError',
      message: expect.stringMatching(/invalidated|revoked/),
    });
    // On the wire: the same (unexpired) token is now 401 invalid_token.
    const res = await http(`${emulator.baseUrl}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: '{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
    });
    expect(res.status).toBe(401);
    expect(res.headers['www-authenticate']).toMatch(/error="invalid_token", error_description="access was revoked by the person"/);
    await client.close();
  });

  it('JSON-RPC batches are refused whole (MCP 2025-06-18 removed them), before any call counts', async () => {
    const emulator = await startInProcess();
    const { tokens } = await authorizeAndApprove(emulator, { scope: 'ask' });
    const calls = [1, 2].map((id) => toolCall('ask', { question: 'Hallo?' }, id));
    const res = await postMcp(emulator.baseUrl, tokens!.access_token, calls);
    expect(res.status).toBe(400);
    expect(res.json()).toMatchObject({ error: { code: -32600 } });
    expect(emulator.core.state.charges.count).toBe(0);
  });

  it.each([
    ['not JSON', '{"jsonrpc":"2.0",', 400, -32700],
    ['an empty body', '', 400, -32700],
    ['a number', '5', 400, -32600],
    ['null', 'null', 400, -32600],
    ['an object without jsonrpc', '{"id":1,"method":"tools/list"}', 400, -32600],
    ['JSON-RPC 1.0', '{"jsonrpc":"1.0","id":1,"method":"tools/list"}', 400, -32600],
    ['an object id', '{"jsonrpc":"2.0","id":{},"method":"tools/list"}', 400, -32600],
    ['neither method nor result', '{"jsonrpc":"2.0","id":1}', 400, -32600],
  ])(
    'JSON-RPC 2.0 §5.1: a body that is %s answers HTTP %i with the JSON-RPC error %i, not a problem',
    async (_what, body, status, code) => {
      const emulator = await startInProcess();
      const { tokens } = await authorizeAndApprove(emulator, { scope: 'ask' });
      const res = await http(`${emulator.baseUrl}/mcp`, {
        method: 'POST',
        headers: bearer(tokens!.access_token, { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }),
        body,
      });
      expect(res.status).toBe(status);
      expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
      expect(res.json()).toEqual({ jsonrpc: '2.0', id: null, error: { code, message: expect.any(String) } });
    },
  );

  it('MCP Streamable HTTP: a body that is not application/json is 415 in JSON-RPC shape', async () => {
    const emulator = await startInProcess();
    const { tokens } = await authorizeAndApprove(emulator, { scope: 'ask' });
    const res = await http(`${emulator.baseUrl}/mcp`, {
      method: 'POST',
      headers: bearer(tokens!.access_token, { 'content-type': 'text/plain', accept: 'application/json, text/event-stream' }),
      body: 'hallo',
    });
    expect(res.status).toBe(415);
    expect(res.json()).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32000 } });
  });

  it("spec 8: every /mcp answer to a token holder carries RateLimit-*; only tools/call counts against the grant's window", async () => {
    const emulator = await startInProcess({ rateLimit: '5/min' });
    const { tokens } = await authorizeAndApprove(emulator, { scope: 'ask' });
    const post = (body: string) =>
      http(`${emulator.baseUrl}/mcp`, {
        method: 'POST',
        headers: bearer(tokens!.access_token, { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }),
        body,
      });
    const remaining = (res: { headers: Record<string, unknown> }) => [res.headers['ratelimit-limit'], res.headers['ratelimit-remaining']];
    expect(remaining(await post('{"jsonrpc":"2.0","id":1,"method":"tools/list"}'))).toEqual(['5', '5']);
    const call = '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask","arguments":{"question":"Hallo?"}}}';
    expect(remaining(await post(call))).toEqual(['5', '4']);
    expect(remaining(await post('{"jsonrpc":"2.0","id":3,"method":"tools/list"}'))).toEqual(['5', '4']);
    expect(remaining(await post('{"jsonrpc":"2.0"}'))).toEqual(['5', '4']);
    const get = await http(`${emulator.baseUrl}/mcp`, { headers: bearer(tokens!.access_token, { accept: 'text/event-stream' }) });
    expect(get.status).toBe(405);
    expect(remaining(get)).toEqual(['5', '4']);
  });

  it('GET /mcp with a valid token: 405, this server is stateless and answers POST only', async () => {
    const emulator = await startInProcess();
    const { tokens } = await authorizeAndApprove(emulator, { scope: 'ask' });
    const res = await http(`${emulator.baseUrl}/mcp`, {
      headers: { authorization: `Bearer ${tokens!.access_token}`, accept: 'text/event-stream' },
    });
    expect(res.status).toBe(405);
    expect(res.headers.allow).toBe('POST');
  });
});

describe.each(MCP_VERSIONS)('the tools: the same reach as the REST allowlist (spec 1, 4.4, 4.5), MCP %s', (version) => {
  it('ask answers in German with sources, charged like POST /chat/ask; an idempotency_key replays the same message_id uncharged', async () => {
    const emulator = await startInProcess();
    const { client } = await connectWithOAuth(emulator, 'ask', undefined, version);
    const first = await call(client, 'ask', { question: 'Wann kommt der Hufschmied?', idempotency_key: 'k1' });
    expect(first.data).toMatchObject({ outcome: 'answered' });
    expect(first.text).toMatch(/Hufschmied/);
    expect(first.data.sources.length).toBeGreaterThan(0);
    // The same composed answer as POST /chat/ask: quoted sentences numbered after their sources.
    expect(first.data.answer).toMatch(/mittwochs ab 8 Uhr \[1\]\./);
    const charges = emulator.core.state.charges.count;
    const again = await call(client, 'ask', { question: 'Wann kommt der Hufschmied?', idempotency_key: 'k1' });
    expect(again.data.message_id).toBe(first.data.message_id);
    expect(emulator.core.state.charges.count).toBe(charges);
    const conflict = await call(client, 'ask', { question: 'Etwas anderes?', idempotency_key: 'k1' });
    expect(conflict.result.isError).toBe(true);
    expect(conflict.data).toMatchObject({ error: 'idempotency_key_reused', status: 409 });
    await call(client, 'ask', { question: 'Wann kommt der Hufschmied?' });
    expect(emulator.core.state.charges.count).toBe(charges + 1);
    await client.close();
  });

  it('4.4 rule 3: a research job started and polled through tools reaches succeeded with report and citations', async () => {
    const clock = new ManualClock();
    const emulator = await startInProcess({ clock, timings: FAST_JOBS });
    const { client } = await connectWithOAuth(emulator, 'research', undefined, version);
    const started = await call(client, 'start_research', { question: 'Wie läuft der Weidegang?' });
    expect(started.data).toMatchObject({ status: 'queued', poll: `/research/${started.data.job_id}` });
    expect((await call(client, 'get_research', { job_id: started.data.job_id })).data.status).toBe('queued');
    // Queued, then running, then done: the job's whole time on the emulator's clock.
    clock.advance(FAST_JOBS.researchQueueMs + FAST_JOBS.researchRunMs);
    const job: Structured = (await call(client, 'get_research', { job_id: started.data.job_id })).data;
    expect(job.status).toBe('succeeded');
    expect(typeof job.report).toBe('string');
    expect(job.citations.length).toBeGreaterThan(0);
    const missing = await call(client, 'get_research', { job_id: 'job_nope' });
    expect(missing.result.isError).toBe(true);
    await client.close();
  });

  it('4.4 rule 4: a training document added through tools becomes findable once indexed, with its link', async () => {
    const clock = new ManualClock();
    const emulator = await startInProcess({ clock, timings: FAST_JOBS });
    const { client } = await connectWithOAuth(emulator, 'ask training.write', undefined, version);
    const added = await call(client, 'add_training_document', {
      file_name: 'aufzug.md',
      content: '# Wartung Aufzug Nordflügel\n\nDer Aufzug im Nordflügel wird von der Firma Hebetech gewartet.\n',
    });
    const id = added.data.document_id as string;
    expect(
      (await call(client, 'ask', { question: 'Wer wartet den Aufzug im Nordflügel?' })).data.sources.map((s: Structured) => s.title),
    ).not.toContain('Wartung Aufzug Nordflügel');
    clock.advance(10 * SECOND);
    expect((await call(client, 'get_training_document', { document_id: id })).data.processing_step).toBe('indexed');
    expect(
      (await call(client, 'ask', { question: 'Wer wartet den Aufzug im Nordflügel?' })).data.sources.map((s: Structured) => s.title),
    ).toContain('Wartung Aufzug Nordflügel');
    expect((await call(client, 'get_training_document_url', { document_id: id })).data.url).toBe(`${emulator.authUrl}/documents/${id}`);
    await client.close();
  });
});

describe.each(MCP_VERSIONS)('the same charges and rate limits as the REST twins (spec 1, 7, 8), MCP %s', (version) => {
  it("start_research is charged once like POST /research; tools/call counts against the grant's window and a call over it gets 429 with Retry-After", async () => {
    const emulator = await startInProcess({ rateLimit: '3/min' });
    const { client, provider } = await connectWithOAuth(emulator, 'ask research', undefined, version);
    const byRoute = () => emulator.core.state.charges.count;
    const countBefore = byRoute();
    await call(client, 'start_research', { question: 'Wie läuft der Weidegang?' });
    expect(byRoute()).toBe(countBefore + 1);
    await call(client, 'get_research', { job_id: Object.keys(emulator.core.state.research_jobs)[0]! }); // polling is free
    expect(byRoute()).toBe(countBefore + 1);
    await call(client, 'ask', { question: 'Wann kommt der Hufschmied?', idempotency_key: 'rl' }); // third call of the window
    const token = provider.tokens()!.access_token;
    const res = await postMcp(emulator.baseUrl, token, toolCall('ask', { question: 'Noch eine Frage?' }, 9));
    expect(res.status).toBe(429);
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    expect(res.headers['ratelimit-remaining']).toBe('0');
    await client.close();
  });
});

describe.each(MCP_VERSIONS)('write actions wait for the person (spec 2.7 workspace.write, 4.4 rule 1), MCP %s', (version) => {
  it('an update names the record and the field: the change shows old and new value, and applies to that record', async () => {
    const emulator = await startInProcess();
    const { client } = await connectWithOAuth(emulator, 'ask workspace.write', undefined, version);
    const asked = await call(client, 'ask', { question: 'Ändere beim Kontakt „Josef Huber“ die Telefonnummer auf „+49 170 1234567“.' });
    expect(asked.data).toMatchObject({
      outcome: 'pending_approval',
      operation: 'update',
      record_id: 'con-002',
      fields: { phone: '+49 170 1234567' },
    });
    expect(asked.data.description).toBe(
      'Eintrag Kontakt „Josef Huber“ (con-002) ändern: Telefon von „+49 8041 771230“ auf „+49 170 1234567“.',
    );
    await decide(asked.data.approve_url, 'approve');
    const applied = await call(client, 'continue_ask', { action_id: asked.data.action_id });
    expect(applied.data.record).toMatchObject({
      id: 'con-002',
      title: 'Josef Huber',
      phone: '+49 170 1234567',
      company: 'Hufbeschlag Huber',
    });
    await client.close();
  });

  it('rejected: continue_ask reports the rejection and nothing changes', async () => {
    const emulator = await startInProcess();
    const { client } = await connectWithOAuth(emulator, 'ask workspace.write', undefined, version);
    const asked = await call(client, 'ask', {
      question: 'Lege eine Aufgabe „Dachrinne reinigen“ an, Fälligkeit: 2026-12-01, Zuständig: Georg Mustermann.',
    });
    expect(asked.data).toMatchObject({ outcome: 'pending_approval', kind: 'work_items' });
    expect(await decide(asked.data.approve_url, 'reject')).toContain('Abgelehnt.');
    const rejected = await call(client, 'continue_ask', { action_id: asked.data.action_id });
    expect(rejected.data).toMatchObject({ outcome: 'rejected', status: 'rejected' });
    expect(rejected.text).toMatch(/abgelehnt; es wurde nichts geändert/);
    expect(emulator.core.state.workspace_changes).toHaveLength(0);
    expect(
      (await call(client, 'ask', { question: 'Dachrinne reinigen' })).data.sources.some(
        (s: Structured) => s.title === 'Dachrinne reinigen',
      ),
    ).toBe(false);
    await client.close();
  });

  it('without workspace.write a request for a change is refused with a German explanation, and nothing is prepared', async () => {
    const emulator = await startInProcess();
    const { client } = await connectWithOAuth(emulator, 'ask', undefined, version);
    const refused = await call(client, 'ask', { question: 'Lege einen Kontakt „Anna Schmidt“ an, Telefon: 0171 2345678.' });
    expect(refused.data).toMatchObject({ outcome: 'refused', needed_scope: 'workspace.write' });
    expect(refused.text).toMatch(/fehlt diesem Zugang die Berechtigung „workspace.write“; es wurde nichts geändert/);
    expect(Object.keys(emulator.core.state.pending_actions)).toHaveLength(0);
    await client.close();
  });

  it('an unclear request prepares nothing and says what is needed, in German', async () => {
    const emulator = await startInProcess();
    const { client } = await connectWithOAuth(emulator, 'ask workspace.write', undefined, version);
    const unclear = await call(client, 'ask', { question: 'Erstelle bitte etwas Schönes.' });
    expect(unclear.data.outcome).toBe('unclear');
    expect(unclear.text).toMatch(/Es wurde nichts vorbereitet/);
    expect(Object.keys(emulator.core.state.pending_actions)).toHaveLength(0);
    await client.close();
  });

  it('spec 3.3: after the grant is revoked its open action can no longer be approved, nor applied under a new grant', async () => {
    const emulator = await startInProcess();
    const first = await connectWithOAuth(emulator, 'ask workspace.write', undefined, version);
    const asked = await call(first.client, 'ask', { question: 'Lege einen Kontakt „Anna Schmidt“ an.' });
    const page = await new Browser().get(asked.data.approve_url);
    expect(page.text).toMatch(/<table id="changes">.*<td>Name<\/td><td><\/td><td><bdi>Anna Schmidt<\/bdi><\/td>/s);
    await revokeGrant(emulator.core, listGrants(emulator.core)[0]!.id, 'person');
    expect((await new Browser().submitForm(asked.data.approve_url, { decision: 'approve' })).answer.status).toBe(409);
    expect(emulator.core.state.pending_actions[asked.data.action_id]!.status).toBe('pending');
    // The same client, authorized anew: the old grant's action is not its to continue.
    const second = await connectWithOAuth(emulator, 'ask workspace.write', undefined, version);
    const other = await call(second.client, 'continue_ask', { action_id: asked.data.action_id });
    expect(other.result.isError).toBe(true);
    expect(other.data).toMatchObject({ error: 'action_not_found', status: 404 });
    await first.client.close();
    await second.client.close();
  });

  it('the approval page belongs to the person: another person cannot see or decide it; the form needs its CSRF token', async () => {
    const emulator = await startInProcess();
    const { client } = await connectWithOAuth(emulator, 'ask workspace.write', undefined, version);
    const asked = await call(client, 'ask', { question: 'Lege einen Kontakt „Anna Schmidt“ an.' });
    const other = new Browser();
    const { client_id } = await register(emulator.baseUrl);
    await other.get(authorizeUrl(emulator.authUrl, emulator.baseUrl, { client_id, login_hint: 'person_max' }, pkce().challenge)); // signs the browser in as Max
    expect((await other.get(asked.data.approve_url)).status).toBe(404);
    const person = new Browser();
    await person.get(asked.data.approve_url);
    const forged = await person.post(asked.data.approve_url, { csrf: 'x'.repeat(43), decision: 'approve' });
    expect(forged.status).toBe(403);
    expect(emulator.core.state.pending_actions[asked.data.action_id]!.status).toBe('pending');
    await client.close();
  });
});
