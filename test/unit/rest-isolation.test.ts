import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/state/clock.js';
import { startInProcess } from '../helpers/emulator.js';
import { Browser, authorizeAndApprove, authorizeUrl, http, pkce, postForm, postJson, register, exchangeCode } from '../helpers/oauth.js';

/** Runs the real flow for a given person (login_hint picks who is signed in on the consent page). */
async function tokenFor(emu: Awaited<ReturnType<typeof startInProcess>>, client_id: string, person: string, scope: string) {
  const browser = new Browser();
  const p = pkce();
  const page = await browser.get(authorizeUrl(emu.authUrl, emu.baseUrl, { client_id, scope, login_hint: person }, p.challenge));
  const { action, fields } = Browser.form(page.text);
  const answer = await browser.post(new URL(action, emu.authUrl).toString(), { ...fields, decision: 'approve' });
  const code = new URL(answer.headers.location as string).searchParams.get('code')!;
  return (await exchangeCode(emu.baseUrl, { client_id, code, code_verifier: p.verifier })).json().access_token as string;
}

const auth = (token: string) => ({ authorization: `Bearer ${token}` });

describe('one person\u2019s data never reaches another person using the same client', () => {
  it('training documents, research jobs and idempotent replays stay with their person', async () => {
    const clock = new ManualClock();
    const emu = await startInProcess({ clock });
    const { client_id } = await register(emu.baseUrl);
    const erika = await tokenFor(emu, client_id, 'person_erika', 'ask research training.write');
    const max = await tokenFor(emu, client_id, 'person_max', 'ask research training.write');
    const secret = { file_name: 'geheim.md', content: '# Tresor\n\nDer Tresorcode lautet Zebraschnecke 4711.' };
    const { document_id } = (await postJson(`${emu.baseUrl}/training`, secret, auth(erika))).json();
    const { poll } = (await postJson(`${emu.baseUrl}/research`, { question: 'Zebraschnecke Tresorcode' }, auth(erika))).json();
    clock.advance(10_000);
    await emu.resources.settle();

    const erikaAsk = (
      await postJson(`${emu.baseUrl}/chat/ask`, { question: 'Zebraschnecke Tresorcode' }, { ...auth(erika), 'idempotency-key': 'k' })
    ).json();
    expect(erikaAsk.sources.map((s: { id: string }) => s.id)).toContain(document_id);

    const maxAsk = (await postJson(`${emu.baseUrl}/chat/ask`, { question: 'Zebraschnecke Tresorcode' }, auth(max))).json();
    // Only Erika's document holds "4711" and her document id; Max's own question may echo the other words.
    expect(JSON.stringify(maxAsk)).not.toContain('4711');
    expect(JSON.stringify(maxAsk)).not.toContain(document_id);
    const maxReplay = await postJson(
      `${emu.baseUrl}/chat/ask`,
      { question: 'Zebraschnecke Tresorcode' },
      { ...auth(max), 'idempotency-key': 'k' },
    );
    expect(maxReplay.text).not.toContain('4711');
    expect(maxReplay.json().message_id).not.toBe(erikaAsk.message_id);
    const maxResearch = (await postJson(`${emu.baseUrl}/research`, { question: 'Zebraschnecke Tresorcode' }, auth(max))).json();
    clock.advance(10_000);
    const maxJob = (await http(`${emu.baseUrl}${maxResearch.poll}`, { headers: auth(max) })).text;
    expect(maxJob).not.toContain('4711');
    expect(maxJob).not.toContain(document_id);
    // Erika's own research does find her document.
    expect((await http(`${emu.baseUrl}${poll}`, { headers: auth(erika) })).text).toContain(document_id);

    for (const path of [`/training/${document_id}`, `/training/${document_id}/url`, poll]) {
      expect((await http(`${emu.baseUrl}${path}`, { headers: auth(max) })).status, path).toBe(404);
    }
  });
});

describe('spec 5.5, 7: the REST routes check the token before they read the body', () => {
  it.each([
    ['broken JSON', '{bad'],
    ['a body without question', '{}'],
  ])('without a token, %s still gets 401 with the challenge', async (_why, body) => {
    const emu = await startInProcess();
    const res = await http(`${emu.baseUrl}/chat/ask`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    expect(res.status).toBe(401);
    expect(res.headers['www-authenticate']).toContain('scope="ask"');
  });

  it('a form-encoded body is refused with 415, so idempotency always fingerprints the JSON bytes', async () => {
    const emu = await startInProcess();
    const flow = await authorizeAndApprove(emu, { scope: 'ask research training.write' });
    for (const path of ['/chat/ask', '/research', '/training']) {
      const res = await postForm(
        `${emu.baseUrl}${path}`,
        { question: 'Kaution', file_name: 'a.md', content: 'x' },
        { ...auth(flow.tokens!.access_token), 'idempotency-key': 'f' },
      );
      expect(res.status, path).toBe(415);
      expect(res.headers['content-type']).toContain('application/problem+json');
    }
    expect(await emu.core.persistence.readCharges()).toHaveLength(0);
  });

  it('router errors use the one error shape too', async () => {
    const emu = await startInProcess();
    const flow = await authorizeAndApprove(emu, { scope: 'research' });
    const res = await http(`${emu.baseUrl}/research/${'x'.repeat(300)}`, { headers: auth(flow.tokens!.access_token) });
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.headers['content-type']).toContain('application/problem+json');
  });

  it('the retired per-kind routes answer no CORS preflight', async () => {
    const emu = await startInProcess();
    const res = await http(`${emu.baseUrl}/contacts`, {
      method: 'OPTIONS',
      headers: { origin: 'http://evil.example', 'access-control-request-method': 'GET' },
    });
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
  });
});
