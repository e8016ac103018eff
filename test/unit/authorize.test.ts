import { describe, expect, it } from 'vitest';
import { startInProcess } from '../helpers/emulator.js';
import { Browser, REDIRECT, authorizeAndApprove, authorizeUrl, http, pkce, register } from '../helpers/oauth.js';
import { listGrants } from '../../src/core/oauth/grants-admin.js';

const setup = async () => {
  const emu = await startInProcess();
  const { client_id } = await register(emu.baseUrl);
  return { emu, client_id, challenge: pkce().challenge };
};

describe('spec 4.2 / OAuth 2.1 §4.1.2.1: errors before the redirect URI is trusted are shown, never redirected', () => {
  it('unknown client_id → 400 error page, no redirect', async () => {
    const { emu, challenge } = await setup();
    const res = await http(authorizeUrl(emu.authUrl, emu.baseUrl, { client_id: 'client_nope' }, challenge));
    expect(res.status).toBe(400);
    expect(res.headers.location).toBeUndefined();
    expect(res.text).toContain('invalid_client');
  });

  it('the error page speaks German to the person; the English description waits folded under "Für Entwickler"', async () => {
    const { emu, challenge } = await setup();
    const res = await http(authorizeUrl(emu.authUrl, emu.baseUrl, { client_id: 'nope' }, challenge));
    const [forThePerson, forDevelopers] = res.text.split('<details class="developer">');
    expect(forThePerson).toContain('Die Anwendung, die Sie hierher geschickt hat, ist bei diesem Dienst nicht registriert.');
    expect(forThePerson).toContain('Sie wurden nicht zur Anwendung zurückgeleitet');
    expect(forThePerson).not.toContain('register the client first');
    expect(forDevelopers).toContain('<p lang="en"><bdi>unknown client_id &quot;nope&quot;: register the client first</bdi></p>');
  });

  it('redirect URI mismatch → 400 error page, not redirected', async () => {
    const { emu, client_id, challenge } = await setup();
    for (const redirect_uri of ['http://127.0.0.1:9/other', 'https://evil.example/callback', 'http://127.0.0.1:9/callback?x=1']) {
      const res = await http(authorizeUrl(emu.authUrl, emu.baseUrl, { client_id, redirect_uri }, challenge));
      expect(res.status).toBe(400);
      expect(res.headers.location).toBeUndefined();
      expect(res.text).toContain('nicht');
    }
  });

  it('missing client_id or redirect_uri → error page (JSON when the client asks for JSON)', async () => {
    const { emu, client_id, challenge } = await setup();
    const res = await http(authorizeUrl(emu.authUrl, emu.baseUrl, { client_id: '' }, challenge), {
      headers: { accept: 'application/json' },
    });
    expect(res.status).toBe(400);
    expect(res.json().error).toBe('invalid_request');
    const noRedirect = await http(`${emu.authUrl}/oauth/authorize?client_id=${client_id}&response_type=code`);
    expect(noRedirect.status).toBe(400);
  });

  it('RFC 8252 §7.3: a loopback redirect URI matches with any port, but path and host must match', async () => {
    const { emu, client_id, challenge } = await setup();
    expect(
      (await http(authorizeUrl(emu.authUrl, emu.baseUrl, { client_id, redirect_uri: 'http://127.0.0.1:53123/callback' }, challenge)))
        .status,
    ).toBe(200);
    expect(
      (await http(authorizeUrl(emu.authUrl, emu.baseUrl, { client_id, redirect_uri: 'http://localhost:9/callback' }, challenge))).status,
    ).toBe(400);
  });

  // Each of these reads as http://127.0.0.1/callback to a URL parser; none is that string with another port.
  it.each([
    ['an IPv4 address in hex', 'http://0x7f.1/callback'],
    ['a shortened IPv4 address', 'http://127.1/callback'],
    ['an IPv4 address as one number', 'http://2130706433/callback'],
    ['a dot segment', 'http://127.0.0.1/callback/../callback'],
    ['a backslash for the slash', 'http://127.0.0.1\\callback'],
    ['a trailing dot on the host', 'http://127.0.0.1./callback'],
    ['an upper-case scheme', 'HTTP://127.0.0.1/callback'],
    ['an empty port', 'http://127.0.0.1:/callback'],
    ['a port with a leading zero', 'http://127.0.0.1:08080/callback'],
    ['a port over 65535', 'http://127.0.0.1:65536/callback'],
    ['a trailing slash', 'http://127.0.0.1/callback/'],
  ])(
    '41.14: OAuth 2.1 §2.3.1, RFC 8252 §7.3: registered http://127.0.0.1/callback does not match %s (%s): 400, not redirected',
    async (_what, redirect_uri) => {
      const { emu, challenge } = await setup();
      const { client_id } = await register(emu.baseUrl, { redirect_uris: ['http://127.0.0.1/callback'] });
      const res = await http(authorizeUrl(emu.authUrl, emu.baseUrl, { client_id, redirect_uri }, challenge));
      expect(res.status).toBe(400);
      expect(res.headers.location).toBeUndefined();
      expect(res.text).toContain('invalid_request');
    },
  );

  it.each([
    'http://127.0.0.1/callback',
    'http://127.0.0.1:80/callback',
    'http://127.0.0.1:53123/callback',
    'http://127.0.0.1:65535/callback',
  ])('41.14: RFC 8252 §7.3: registered http://127.0.0.1/callback matches %s, the same string but for the port', async (redirect_uri) => {
    const { emu, challenge } = await setup();
    const { client_id } = await register(emu.baseUrl, { redirect_uris: ['http://127.0.0.1/callback'] });
    expect((await http(authorizeUrl(emu.authUrl, emu.baseUrl, { client_id, redirect_uri }, challenge))).status).toBe(200);
  });
});

describe('spec 4.2 / RFC 9207: later errors redirect back with error, state and iss', () => {
  const cases: Array<[string, Record<string, string | null>, string]> = [
    ['missing code_challenge', { code_challenge: null }, 'invalid_request'],
    ['code_challenge_method plain', { code_challenge_method: 'plain' }, 'invalid_request'],
    ['absent code_challenge_method (means plain)', { code_challenge_method: null }, 'invalid_request'],
    ['challenge too short', { code_challenge: 'abc' }, 'invalid_request'],
    ['retired scope documents.read', { scope: 'ask documents.read' }, 'invalid_scope'],
    ['unknown scope', { scope: 'ask email' }, 'invalid_scope'],
    ['missing scope', { scope: '' }, 'invalid_scope'],
    ['resource other than {base_url}/mcp', { resource: 'https://other.example/mcp' }, 'invalid_target'],
    ['response_type token', { response_type: 'token' }, 'unsupported_response_type'],
  ];
  it.each(cases)('%s → 302 %s', async (_why, overrides, error) => {
    const { emu, client_id, challenge } = await setup();
    const url = new URL(authorizeUrl(emu.authUrl, emu.baseUrl, { client_id, state: 'st-1' }, challenge));
    for (const [k, v] of Object.entries(overrides)) {
      if (v === null) url.searchParams.delete(k);
      else url.searchParams.set(k, v);
    }
    const res = await http(url.toString());
    expect(res.status).toBe(302);
    const location = new URL(res.headers.location as string);
    expect(`${location.origin}${location.pathname}`).toBe(REDIRECT);
    expect(location.searchParams.get('error')).toBe(error);
    expect(location.searchParams.get('state')).toBe('st-1');
    expect(location.searchParams.get('iss')).toBe(emu.issuer);
    expect(location.searchParams.get('code')).toBeNull();
  });

  it('a repeated parameter → invalid_request', async () => {
    const { emu, client_id, challenge } = await setup();
    const res = await http(authorizeUrl(emu.authUrl, emu.baseUrl, { client_id, state: 's' }, challenge) + '&scope=research');
    expect(new URL(res.headers.location as string).searchParams.get('error')).toBe('invalid_request');
  });

  it('spec 2.3, 5.8: a request without resource is valid (identity) and shows consent', async () => {
    const { emu, client_id, challenge } = await setup();
    const res = await http(authorizeUrl(emu.authUrl, emu.baseUrl, { client_id, resource: null }, challenge));
    expect(res.status).toBe(200);
    expect(res.text).toContain('Identität');
  });
});

describe('spec 5.6 / 3.3: the consent screen, every time', () => {
  it('lists each scope in plain German, marks writes, labels client_name unverified and names the return host', async () => {
    const { emu, client_id, challenge } = await setup();
    const res = await http(
      authorizeUrl(emu.authUrl, emu.baseUrl, { client_id, scope: 'ask workspace.write research training.write' }, challenge),
    );
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toContain('text/html');
    expect(res.text).toContain('<html lang="de">');
    expect(res.text).toContain('nicht verifiziert');
    expect(res.text).toContain('Fragen zu Ihrem Arbeitsbereich');
    expect(res.text).toContain('Recherchen in der Wissensdatenbank');
    const writes = [...res.text.matchAll(/<li data-scope="([^"]+)">[^]*?<\/li>/g)]
      .filter((m) => m[0].includes('Schreibzugriff'))
      .map((m) => m[1]);
    expect(writes).toEqual(['workspace.write', 'training.write']);
    expect(res.text).toContain('<strong id="redirect-host"><bdi>127.0.0.1:9</bdi></strong>');
    expect(res.text).toContain('name="decision" value="approve" class="primary">Zulassen</button>');
    expect(res.text).toContain('name="decision" value="deny">Ablehnen</button>');
    expect(res.headers['content-security-policy']).toContain("default-src 'none'");
  });

  it('client_name is HTML-escaped: <script> renders inert', async () => {
    const emu = await startInProcess();
    const { client_id } = await register(emu.baseUrl, { client_name: '<script>alert(1)</script>"\'&' });
    const res = await http(authorizeUrl(emu.authUrl, emu.baseUrl, { client_id }, pkce().challenge));
    expect(res.text).not.toContain('<script>alert(1)</script>');
    expect(res.text).toContain('&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&amp;');
  });

  it('deny → redirect with access_denied, state and iss; no grant stored', async () => {
    const emu = await startInProcess();
    const result = await authorizeAndApprove(emu, { decision: 'deny' });
    expect(result.location.searchParams.get('error')).toBe('access_denied');
    expect(result.location.searchParams.get('state')).toBe(result.state);
    expect(result.location.searchParams.get('iss')).toBe(emu.issuer);
    expect(Object.keys(emu.core.state.grants)).toHaveLength(0);
  });

  it('approve → redirect with code, the exact state and iss; one grant per approval', async () => {
    const emu = await startInProcess();
    const { client_id } = await register(emu.baseUrl);
    const browser = new Browser();
    const first = await authorizeAndApprove(emu, { client_id, browser, exchange: false });
    expect(first.code).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(first.location.searchParams.get('iss')).toBe(emu.issuer);
    // Consent is shown again although a grant exists (spec 3.3): the helper fails unless the page comes back.
    await authorizeAndApprove(emu, { client_id, browser, exchange: false });
    expect(listGrants(emu.core, { client_id })).toHaveLength(2);
  });

  it('CSRF: the form is refused without its session or with a forged token, and state stays unchanged', async () => {
    const { emu, client_id, challenge } = await setup();
    const browser = new Browser();
    const page = await browser.get(authorizeUrl(emu.authUrl, emu.baseUrl, { client_id }, challenge));
    const { fields } = Browser.form(page.text);
    const stranger = new Browser();
    const noSession = await stranger.post(`${emu.authUrl}/consent`, { ...fields, decision: 'approve' });
    expect(noSession.status).toBe(403);
    expect(noSession.headers.location).toBeUndefined();
    const forged = await browser.post(`${emu.authUrl}/consent`, { ...fields, csrf: 'x'.repeat(43), decision: 'approve' });
    expect(forged.status).toBe(403);
    expect(Object.keys(emu.core.state.grants)).toHaveLength(0);
    const bad = await browser.post(`${emu.authUrl}/consent`, { ...fields, decision: 'maybe' });
    expect(bad.status).toBe(400);
    // The genuine answer still works once, and only once.
    expect((await browser.post(`${emu.authUrl}/consent`, { ...fields, decision: 'approve' })).status).toBe(302);
    expect((await browser.post(`${emu.authUrl}/consent`, { ...fields, decision: 'approve' })).status).toBe(400);
  });
});
