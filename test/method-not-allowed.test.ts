import { describe, expect, it } from 'vitest';
import { startEmulator } from './helpers/emulator.js';
import { http, type HttpResult } from './helpers/oauth.js';
import { rawExchange, requestHead } from './helpers/raw-http.js';

describe('RFC 9110 §15.5.6: a known path with a method it does not take → 405 with Allow, in the route error shape', () => {
  const json405 = (error: string) => (res: HttpResult) => {
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.json()).toEqual({ error, error_description: expect.any(String) });
  };
  const problem405 = (res: HttpResult) => {
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.json()).toMatchObject({ type: 'urn:agent-access:error:method_not_allowed', status: 405 });
  };
  const page405 = (res: HttpResult) => {
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(res.text).toContain('Fehlercode: <code>method_not_allowed</code>');
  };
  it.each([
    ['GET', 'base', '/oauth/token', 'POST', json405('invalid_request')],
    ['GET', 'base', '/oauth/revoke', 'POST', json405('invalid_request')],
    ['GET', 'base', '/oauth/register', 'POST', json405('invalid_request')],
    ['HEAD', 'base', '/oauth/token', 'POST', () => undefined],
    ['PUT', 'base', '/chat/ask', 'POST', problem405],
    ['DELETE', 'base', '/research/job_x', 'GET, HEAD', problem405],
    ['POST', 'base', '/training/doc_x/url', 'GET, HEAD', problem405],
    ['DELETE', 'base', '/.well-known/oauth-authorization-server', 'GET, HEAD', problem405],
    ['PATCH', 'base', '/contacts/c1', 'GET, HEAD', problem405],
    ['PUT', 'base', '/_admin/grants', 'GET, HEAD', problem405],
    ['GET', 'base', '/_admin/faults/fault_1', 'DELETE', problem405],
    ['POST', 'auth', '/oauth/authorize', 'GET, HEAD', page405],
    ['GET', 'auth', '/consent', 'POST', page405],
    ['DELETE', 'auth', '/settings', 'GET, HEAD', page405],
  ] as const)('%s %s%s → 405, Allow: %s', async (method, origin, path, allow, shape) => {
    const emu = await startEmulator();
    const res = await http(`${origin === 'base' ? emu.baseUrl : emu.authUrl}${path}`, { method });
    expect(res.status).toBe(405);
    expect(res.headers.allow).toBe(allow);
    shape(res);
  });

  it('over a raw socket: PUT /chat/ask with a JSON body → 405, Allow: POST, read without a reset', async () => {
    const emu = await startEmulator();
    const url = `${emu.baseUrl}/chat/ask`;
    const body = Buffer.from(JSON.stringify({ question: 'Wann kommt der Hufschmied?' }));
    const exchange = await rawExchange(url, requestHead('PUT', url, { 'content-type': 'application/json' }, body), body);
    expect(exchange.error).toBeUndefined();
    expect(exchange.response?.status).toBe(405);
    expect(exchange.response?.headers.allow).toBe('POST');
    expect(exchange.response?.json()).toMatchObject({ type: 'urn:agent-access:error:method_not_allowed', status: 405 });
  });

  it('404 stays for unknown paths; OPTIONS stays with CORS (preflight) and the routes that refuse it; /mcp answers every method with 401', async () => {
    const emu = await startEmulator();
    expect((await http(`${emu.baseUrl}/oauth/tokens`, { method: 'GET' })).status).toBe(404);
    expect((await http(`${emu.authUrl}/nothing`, { method: 'DELETE' })).status).toBe(404);
    // A method the path takes, with a parameter longer than the router matches (100 characters): its 414, not a 405.
    expect((await http(`${emu.baseUrl}/research/${'j'.repeat(150)}`, { method: 'GET' })).status).toBe(414);
    const preflight = await http(`${emu.baseUrl}/oauth/token`, {
      method: 'OPTIONS',
      headers: { origin: 'https://app.example', 'access-control-request-method': 'POST' },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers['access-control-allow-origin']).toBe('*');
    expect((await http(`${emu.baseUrl}/contacts`, { method: 'OPTIONS' })).status).toBe(404);
    for (const method of ['GET', 'PUT', 'PATCH', 'DELETE']) {
      const res = await http(`${emu.baseUrl}/mcp`, { method });
      expect(res.status).toBe(401);
      expect(res.headers['www-authenticate']).toMatch(/^Bearer resource_metadata=/);
    }
  });
});
