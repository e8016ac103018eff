import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/state/clock.js';
import { issueTokens } from '../../src/core/oauth/issue-tokens.js';
import { listGrants, revokeGrant } from '../../src/core/oauth/grants-admin.js';
import { Emulator, type EmulatorOptions } from '../../src/server/emulator.js';
import { startInProcess } from '../helpers/emulator.js';
import { authorizeAndApprove, http, postJson } from '../helpers/oauth.js';
import { deferred } from '../helpers/wait.js';
import { ask, loggedIn } from '../helpers/rest.js';

const withToken = (options: EmulatorOptions = {}, scope = 'ask') => loggedIn(startInProcess, options, scope);

const ledger = (emu: Emulator) => emu.core.persistence.readCharges();

describe('spec 2.4 / 4.4 rules 1-2: POST /chat/ask', () => {
  it('answers in German, grounded: sources name the kind, id, title and a snippet of what was used', async () => {
    const { emu, token } = await withToken();
    const res = await ask(emu, token, 'Wann kommt der Hufschmied?');
    expect(res.status).toBe(200);
    const body = res.json();
    expect(body).toEqual({ answer: expect.any(String), sources: expect.any(Array), message_id: expect.stringMatching(/^msg_/) });
    // A sentence that answers, with the number of its source; not a list of snippets.
    expect(body.answer).toMatch(/mittwochs ab 8 Uhr \[1\]\./);
    expect(body.answer).not.toContain('Folgendes gefunden');
    expect(body.sources.length).toBeGreaterThan(0);
    for (const source of body.sources)
      expect(source).toEqual({ kind: expect.any(String), id: expect.any(String), title: expect.any(String), snippet: expect.any(String) });
    expect(body.sources.map((s: { snippet: string }) => s.snippet).join(' ')).toMatch(/Hufschmied/i);
    expect(res.headers['ratelimit-limit']).toBe('60');
  });

  it('numbers match sources: every [n] in the answer is sources[n - 1], and an off-topic hit (Nebenkostenabrechnung) is not among them', async () => {
    const { emu, token } = await withToken();
    const body = (await ask(emu, token, 'Wann kommt der Hufschmied?')).json();
    const numbers = [...new Set([...body.answer.matchAll(/\[(\d+)\]/g)].map((m: RegExpMatchArray) => Number(m[1])))];
    expect(numbers).toEqual(body.sources.map((_: unknown, i: number) => i + 1));
    expect(body.sources.map((s: { title: string }) => s.title).join(' | ')).not.toMatch(/Nebenkosten/);
  });

  it('the same state and question give the same answer (and a new message_id)', async () => {
    const { emu, token } = await withToken();
    const [a, b] = [
      (await ask(emu, token, 'Wie hoch ist die Kaution?')).json(),
      (await ask(emu, token, 'Wie hoch ist die Kaution?')).json(),
    ];
    expect(a.answer).toBe(b.answer);
    expect(a.sources).toEqual(b.sources);
    expect(a.message_id).not.toBe(b.message_id);
  });

  it('finds the knowledge base too', async () => {
    const { emu, token } = await withToken();
    const body = (await ask(emu, token, 'Bis wann kann ich Widerspruch gegen die Nebenkostenabrechnung einlegen?')).json();
    expect(body.sources.some((s: { kind: string }) => s.kind === 'knowledge')).toBe(true);
  });

  it('nothing found → a German answer that says so, with empty sources', async () => {
    const { emu, token } = await withToken();
    const body = (await ask(emu, token, 'Quantenchromodynamik Gluonen')).json();
    expect(body).toMatchObject({
      answer: 'Dazu habe ich in Ihrem Arbeitsbereich und Ihrer Wissensdatenbank nichts gefunden.',
      sources: [],
    });
  });

  it('rule 1: read-only even with workspace.write: a request for a change is answered, and nothing changes', async () => {
    const { emu, token } = await withToken({}, 'ask workspace.write');
    const before = JSON.stringify(emu.core.state);
    const body = (await ask(emu, token, 'Erstelle einen neuen Kontakt für Hans Huber')).json();
    expect(body.answer).toContain('nichts ändern');
    expect(body.answer).toContain(`${emu.baseUrl}/mcp`);
    const after = JSON.parse(JSON.stringify(emu.core.state));
    // Only the charge bookkeeping moved; the workspace is not in the state and nothing else changed.
    expect({ ...after, charges: null, charge_ledger: null, grants: null }).toEqual({
      ...JSON.parse(before),
      charges: null,
      charge_ledger: null,
      grants: null,
    });
  });

  it('rule 2: an ask that runs past --ask-timeout is abandoned with 504 ask_timeout and not charged', async () => {
    const { emu, token } = await withToken({ askLatencyMs: 400, askTimeoutMs: 50 });
    const res = await ask(emu, token, 'Wann kommt der Hufschmied?');
    expect(res.status).toBe(504);
    expect(res.json()).toMatchObject({ type: 'urn:agent-access:error:ask_timeout', status: 504 });
    expect(await ledger(emu)).toHaveLength(0);
  });

  it.each([
    ['an empty question', { question: '  ' }],
    ['a number', { question: 5 }],
    ['no question', {}],
  ])('%s → 400 problem, nothing charged', async (_why, body) => {
    const { emu, token } = await withToken();
    const res = await postJson(`${emu.baseUrl}/chat/ask`, body, { authorization: `Bearer ${token}` });
    expect(res.status).toBe(400);
    expect(res.headers['content-type']).toContain('application/problem+json');
    expect(await ledger(emu)).toHaveLength(0);
  });

  it('broken JSON → 400 invalid_json', async () => {
    const { emu, token } = await withToken();
    const res = await http(`${emu.baseUrl}/chat/ask`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: '{"question":',
    });
    expect(res.status).toBe(400);
    expect(res.json().type).toBe('urn:agent-access:error:invalid_json');
  });
});

describe('spec 5.5, 5.8, 7: auth on POST /chat/ask', () => {
  it('no token → 401 naming scope ask; another scope → 403 insufficient_scope; identity token → 401', async () => {
    const emu = await startInProcess();
    const none = await ask(emu, undefined, 'x');
    expect(none.status).toBe(401);
    expect(none.headers['www-authenticate']).toContain('scope="ask"');
    const research = await authorizeAndApprove(emu, { scope: 'research' });
    const wrong = await ask(emu, research.tokens!.access_token, 'x');
    expect(wrong.status).toBe(403);
    expect(wrong.headers['www-authenticate']).toContain('insufficient_scope');
    const identity = await authorizeAndApprove(emu, { resource: null });
    expect((await ask(emu, identity.tokens!.access_token, 'x')).status).toBe(401);
  });

  it('a grant revoked by the person is refused on the next request', async () => {
    const { emu, token } = await withToken();
    expect((await ask(emu, token, 'Kaution')).status).toBe(200);
    await revokeGrant(emu.core, listGrants(emu.core)[0]!.id, 'person');
    expect((await ask(emu, token, 'Kaution')).status).toBe(401);
  });
});

describe('spec 4.4 rule 5 / 8: idempotency', () => {
  it('same key and body → the stored response byte for byte, same message_id, one charge', async () => {
    const { emu, token } = await withToken();
    const first = await ask(emu, token, 'Wann kommt der Hufschmied?', { 'idempotency-key': 'k-1' });
    const second = await ask(emu, token, 'Wann kommt der Hufschmied?', { 'idempotency-key': 'k-1' });
    expect(second.status).toBe(first.status);
    expect(second.text).toBe(first.text);
    expect(second.headers['content-type']).toBe(first.headers['content-type']);
    const charges = await ledger(emu);
    expect(charges).toHaveLength(1);
    expect(charges[0]).toMatchObject({ route: 'POST /chat/ask', amount: 0.1, unit: 'AKh', idempotency_key: 'k-1' });
  });

  it('same key, different body → 409, nothing charged', async () => {
    const { emu, token } = await withToken();
    await ask(emu, token, 'Kaution', { 'idempotency-key': 'k-2' });
    const res = await ask(emu, token, 'Hufschmied', { 'idempotency-key': 'k-2' });
    expect(res.status).toBe(409);
    expect(res.json().type).toBe('urn:agent-access:error:idempotency_key_reused');
    expect(await ledger(emu)).toHaveLength(1);
  });

  it('a duplicate while the first is still in flight → 409', async () => {
    // The duplicate is sent once the first has reached its handler; the first then thinks for 300 ms.
    const reached = deferred();
    const { emu, token } = await withToken({
      askLatencyMs: 300,
      extendApi: (app) => void app.addHook('preHandler', async (request) => void (request.url === '/chat/ask' && reached.resolve())),
    });
    const first = ask(emu, token, 'Kaution', { 'idempotency-key': 'k-3' });
    await reached.promise;
    const dup = await ask(emu, token, 'Kaution', { 'idempotency-key': 'k-3' });
    expect(dup.status).toBe(409);
    expect(dup.json().type).toBe('urn:agent-access:error:idempotency_key_in_flight');
    expect((await first).status).toBe(200);
  });

  it('keys are scoped to the client: another client with the same key gets its own answer', async () => {
    const { emu, token } = await withToken();
    const other = await authorizeAndApprove(emu, { scope: 'ask' });
    const a = await ask(emu, token, 'Kaution', { 'idempotency-key': 'shared' });
    const b = await ask(emu, other.tokens!.access_token, 'Kaution', { 'idempotency-key': 'shared' });
    expect(b.json().message_id).not.toBe(a.json().message_id);
    expect(await ledger(emu)).toHaveLength(2);
  });

  it('records last 24 hours on the clock: honoured at 23 h 59 min, forgotten at 24 h', async () => {
    const clock = new ManualClock();
    const { emu, token: first } = await withToken({ clock });
    const a = await ask(emu, first, 'Kaution', { 'idempotency-key': 'day' });
    clock.advance(23 * 3600_000 + 59 * 60_000);
    // Access tokens live 15 minutes: a fresh one for the same client (refresh keeps client and grant).
    const fresh = async () => {
      const family = Object.values(emu.core.state.families)[0]!;
      const grant = emu.core.state.grants[family.grant_id]!;
      return issueTokens(emu.core, grant, family, 'unused', grant.scopes, 'refresh_token').then((t) => t.response.access_token);
    };
    const b = await ask(emu, await fresh(), 'Kaution', { 'idempotency-key': 'day' });
    expect(b.text).toBe(a.text);
    clock.advance(60_000);
    const c = await ask(emu, await fresh(), 'Kaution', { 'idempotency-key': 'day' });
    expect(c.json().message_id).not.toBe(a.json().message_id);
    expect(await ledger(emu)).toHaveLength(2);
  });

  it.each([
    ['empty', ''],
    ['over 255 characters', 'x'.repeat(256)],
    ['non-printable', 'a\tb'],
  ])('a malformed key (%s) → 400', async (_why, key) => {
    const { emu, token } = await withToken();
    const res = await ask(emu, token, 'Kaution', { 'idempotency-key': key });
    expect(res.status).toBe(400);
    expect(res.json().type).toBe('urn:agent-access:error:invalid_idempotency_key');
    expect(await ledger(emu)).toHaveLength(0);
  });

  it('a quoted key (IETF draft syntax) is the same key as the bare one', async () => {
    const { emu, token } = await withToken();
    const a = await ask(emu, token, 'Kaution', { 'idempotency-key': '"8e03978e"' });
    const b = await ask(emu, token, 'Kaution', { 'idempotency-key': '8e03978e' });
    expect(b.text).toBe(a.text);
  });
});

describe('spec 1: charges', () => {
  it('an ask without a key is charged on every call; the ledger and totals agree', async () => {
    const { emu, token, client_id } = await withToken({ prices: { ask: 0.25 } });
    await ask(emu, token, 'Kaution');
    await ask(emu, token, 'Kaution');
    const lines = await ledger(emu);
    expect(lines.map((l) => [l.seq, l.amount, l.idempotency_key])).toEqual([
      [1, 0.25, null],
      [2, 0.25, null],
    ]);
    expect(emu.core.state.charges.by_client[client_id]).toBe(0.5);
  });
});

describe('spec 7, 8: rate limits per grant', () => {
  it('every response carries RateLimit-*; over the limit → 429 with Retry-After, not charged; the window resets on the clock', async () => {
    const clock = new ManualClock();
    const { emu, token } = await withToken({ clock, rateLimit: '3/min' });
    const remaining: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await ask(emu, token, 'Kaution');
      expect(res.status).toBe(200);
      expect(res.headers['ratelimit-limit']).toBe('3');
      remaining.push(String(res.headers['ratelimit-remaining']));
    }
    expect(remaining).toEqual(['2', '1', '0']);
    const limited = await ask(emu, token, 'Kaution');
    expect(limited.status).toBe(429);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    expect(limited.headers['retry-after']).toBe(limited.headers['ratelimit-reset']);
    expect(await ledger(emu)).toHaveLength(3);
    clock.advance(60_000);
    // The access token is still valid (15 min); the new window admits the request.
    expect((await ask(emu, token, 'Kaution')).status).toBe(200);
  });
});
