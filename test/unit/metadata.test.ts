import { describe, expect, it } from 'vitest';
import { startInProcess } from '../helpers/emulator.js';
import { http, register } from '../helpers/oauth.js';

describe('RFC 8414: authorization-server metadata', () => {
  it('issuer is {base_url} byte for byte and every field strict clients need is there', async () => {
    const emu = await startInProcess();
    const res = await http(`${emu.baseUrl}/.well-known/oauth-authorization-server`);
    expect(res.status).toBe(200);
    const m = res.json();
    expect(m.issuer).toBe(emu.baseUrl);
    expect(m.issuer.endsWith('/')).toBe(false);
    expect(m).toMatchObject({
      authorization_endpoint: `${emu.authUrl}/oauth/authorize`,
      token_endpoint: `${emu.baseUrl}/oauth/token`,
      registration_endpoint: `${emu.baseUrl}/oauth/register`,
      revocation_endpoint: `${emu.baseUrl}/oauth/revoke`,
      jwks_uri: `${emu.baseUrl}/.well-known/jwks.json`,
      response_types_supported: ['code'],
      grant_types_supported: ['authorization_code', 'refresh_token'],
      code_challenge_methods_supported: ['S256'],
      token_endpoint_auth_methods_supported: ['none'],
      scopes_supported: ['ask', 'workspace.write', 'research', 'training.write'],
      authorization_response_iss_parameter_supported: true,
    });
  });

  it('jwks_uri serves the public ES256 key only', async () => {
    const emu = await startInProcess();
    const { keys } = (await http(`${emu.baseUrl}/.well-known/jwks.json`)).json();
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatchObject({ kty: 'EC', crv: 'P-256', alg: 'ES256', use: 'sig', kid: expect.any(String) });
    expect(keys[0]).not.toHaveProperty('d');
  });
});

describe('RFC 9728: protected-resource metadata', () => {
  it.each(['/.well-known/oauth-protected-resource/mcp', '/.well-known/oauth-protected-resource'])(
    '%s names resource {base_url}/mcp and the issuer',
    async (path) => {
      const emu = await startInProcess();
      const res = await http(`${emu.baseUrl}${path}`);
      expect(res.status).toBe(200);
      expect(res.json()).toMatchObject({
        resource: `${emu.baseUrl}/mcp`,
        authorization_servers: [emu.baseUrl],
        scopes_supported: ['ask', 'workspace.write', 'research', 'training.write'],
        bearer_methods_supported: ['header'],
      });
    },
  );
});

describe('CORS: browser-based MCP clients reach metadata, registration, token and revocation; not authorize or admin', () => {
  it.each([
    '/.well-known/oauth-authorization-server',
    '/oauth/register',
    '/oauth/token',
    '/oauth/revoke',
    '/.well-known/oauth-protected-resource/mcp',
  ])('preflight to %s allows MCP-Protocol-Version', async (path) => {
    const emu = await startInProcess();
    const res = await http(`${emu.baseUrl}${path}`, {
      method: 'OPTIONS',
      headers: {
        origin: 'http://localhost:6274',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type,mcp-protocol-version',
      },
    });
    expect(res.status).toBe(204);
    expect(res.headers['access-control-allow-origin']).toBe('*');
    expect(String(res.headers['access-control-allow-headers']).toLowerCase()).toContain('mcp-protocol-version');
  });

  it('the authorization endpoint answers no CORS', async () => {
    const emu = await startInProcess();
    const { client_id } = await register(emu.baseUrl);
    const res = await http(`${emu.authUrl}/oauth/authorize?client_id=${client_id}`, { headers: { origin: 'http://evil.example' } });
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('a 404 on {base_url} carries the CORS headers of the metadata: a browser client probing discovery paths reads "not found", not a network error', async () => {
    const emu = await startInProcess();
    const origin = { origin: 'http://x.example' };
    const cors = (headers: Record<string, unknown>) =>
      Object.fromEntries(Object.entries(headers).filter(([k]) => k.startsWith('access-control-')));
    const metadata = await http(`${emu.baseUrl}/.well-known/oauth-authorization-server`, { headers: origin });
    const missing = await http(`${emu.baseUrl}/.well-known/openid-configuration`, { headers: origin });
    expect(missing.status).toBe(404);
    expect(missing.headers['content-type']).toContain('application/problem+json');
    expect(missing.headers['access-control-allow-origin']).toBe('*');
    expect(cors(missing.headers)).toEqual(cors(metadata.headers));
  });

  it('{auth_url} answers no CORS, on its 404s either', async () => {
    const emu = await startInProcess();
    const res = await http(`${emu.authUrl}/.well-known/openid-configuration`, { headers: { origin: 'http://evil.example' } });
    expect(res.status).toBe(404);
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('the admin API answers no CORS, on unknown admin paths either', async () => {
    const emu = await startInProcess();
    const res = await http(`${emu.baseUrl}/_admin/nope`, { headers: { origin: 'http://evil.example' } });
    expect(res.status).toBe(404);
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('the admin API answers no CORS', async () => {
    const emu = await startInProcess();
    const res = await http(`${emu.baseUrl}/_admin/grants`, {
      method: 'OPTIONS',
      headers: { origin: 'http://evil.example', 'access-control-request-method': 'GET', 'access-control-request-headers': 'authorization' },
    });
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
  });
});

describe('DNS rebinding: loopback servers check Host', () => {
  it('a foreign Host header is refused on both origins', async () => {
    const emu = await startInProcess();
    for (const url of [emu.baseUrl, emu.authUrl]) {
      const res = await http(`${url}/.well-known/oauth-authorization-server`, { headers: { host: 'attacker.example' } });
      expect(res.status).toBe(421);
    }
    const port = new URL(emu.baseUrl).port;
    expect((await http(`${emu.baseUrl}/.well-known/oauth-authorization-server`, { headers: { host: `localhost:${port}` } })).status).toBe(
      200,
    );
  });
});
