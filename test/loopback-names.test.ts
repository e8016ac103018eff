/**
 * `localhost` works (STANDARDS "Loopback names"): a client given http://localhost:PORT/mcp or http://[::1]:PORT/mcp
 * compares the protected resource metadata's `resource` with that URL (RFC 9728 §3.3; the MCP SDK, mcp-remote and
 * MCP Inspector do). Over real sockets: the metadata names the resource as the client reached it, tokens are bound
 * to that name (RFC 8707), the issuer keeps its one name (RFC 8414 §3.3), and both servers listen on ::1 too.
 */
import { createServer, type AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import type { Emulator } from '../src/server/emulator.js';
import { startEmulator } from './helpers/emulator.js';
import { connectWithOAuth } from './helpers/mcp-client.js';
import { authorizeAndApprove, bearer, decodeJwt, http, postJson, refresh } from './helpers/oauth.js';

/** `{base_url}` under another loopback name: the same port. */
const under = (emulator: Emulator, name: string) => `http://${name}:${new URL(emulator.baseUrl).port}`;

const MCP_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
const TOOLS_LIST = '{"jsonrpc":"2.0","id":1,"method":"tools/list"}';

describe('RFC 9728 §3.3: the protected resource is named as the client reached it', () => {
  it.each(['127.0.0.1', 'localhost', '[::1]'])(
    'reached as %s: both metadata paths name http://<that name>:PORT/mcp; authorization_servers stays [issuer]',
    async (name) => {
      const emulator = await startEmulator();
      const origin = under(emulator, name);
      for (const path of ['/.well-known/oauth-protected-resource/mcp', '/.well-known/oauth-protected-resource']) {
        const res = await http(`${origin}${path}`);
        expect(res.status, path).toBe(200);
        expect(res.json(), path).toMatchObject({ resource: `${origin}/mcp`, authorization_servers: [emulator.issuer] });
      }
      const challenge = await http(`${origin}/mcp`, { method: 'POST', headers: MCP_HEADERS, body: TOOLS_LIST });
      expect(challenge.status).toBe(401);
      expect(challenge.headers['www-authenticate']).toBe(
        `Bearer resource_metadata="${origin}/.well-known/oauth-protected-resource/mcp", scope="ask"`,
      );
    },
  );

  it('RFC 8414 §3.3: the authorization server metadata is byte-identical under every name, with issuer http://127.0.0.1:PORT', async () => {
    const emulator = await startEmulator();
    const bodies = await Promise.all(
      ['127.0.0.1', 'localhost', '[::1]'].map(
        async (name) => (await http(`${under(emulator, name)}/.well-known/oauth-authorization-server`)).text,
      ),
    );
    expect(new Set(bodies).size).toBe(1);
    expect(JSON.parse(bodies[0]!).issuer).toBe(emulator.issuer);
    expect(emulator.issuer).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  });
});

describe('the MCP SDK client through another loopback name (RFC 9728 §3.3, RFC 8707)', () => {
  it.each(['localhost', '[::1]'])(
    'through http://%s:PORT/mcp: discovery, consent, token and a tool call; the token is for that name, from the 127.0.0.1 issuer',
    async (name) => {
      const emulator = await startEmulator();
      const url = new URL(`${under(emulator, name)}/mcp`);
      const { client, provider } = await connectWithOAuth(emulator, 'ask', url);
      expect(provider.authorizationUrl!.searchParams.get('resource')).toBe(url.href);
      expect(decodeJwt(provider.tokens()!.access_token).payload).toMatchObject({ aud: url.href, iss: emulator.issuer });
      const result = await client.callTool({ name: 'ask', arguments: { question: 'Wann kommt der Hufschmied?' } });
      expect(result.isError).toBeFalsy();
      expect((result.structuredContent as { outcome: string }).outcome).toBe('answered');
      await client.close();
    },
  );
});

describe('RFC 8707: a token is bound to the name the client asked for', () => {
  it('a token obtained for localhost is refused at 127.0.0.1/mcp (401 invalid_token saying so) and accepted at localhost/mcp', async () => {
    const emulator = await startEmulator();
    const localhost = under(emulator, 'localhost');
    const { tokens } = await authorizeAndApprove(emulator, { resource: `${localhost}/mcp` });
    const at127 = await http(`${emulator.baseUrl}/mcp`, {
      method: 'POST',
      headers: bearer(tokens!.access_token, MCP_HEADERS),
      body: TOOLS_LIST,
    });
    expect(at127.status).toBe(401);
    expect(at127.headers['www-authenticate']).toBe(
      `Bearer error="invalid_token", error_description="the access token is for ${localhost}/mcp, not for ${emulator.baseUrl}/mcp as this request reached it; use the name the token was issued for, or authorize again with resource=${emulator.baseUrl}/mcp", resource_metadata="${emulator.baseUrl}/.well-known/oauth-protected-resource/mcp", scope="ask"`,
    );
    const atLocalhost = await http(`${localhost}/mcp`, {
      method: 'POST',
      headers: bearer(tokens!.access_token, MCP_HEADERS),
      body: TOOLS_LIST,
    });
    expect(atLocalhost.status).toBe(200);
  });

  it('spec 4.4: the REST allowlist takes the same rule: a localhost token works at localhost, not at 127.0.0.1 or [::1]', async () => {
    const emulator = await startEmulator();
    const localhost = under(emulator, 'localhost');
    const { tokens } = await authorizeAndApprove(emulator, { resource: `${localhost}/mcp` });
    const ask = (origin: string) =>
      postJson(`${origin}/chat/ask`, { question: 'Wann kommt der Hufschmied?' }, bearer(tokens!.access_token));
    expect((await ask(localhost)).status).toBe(200);
    for (const origin of [emulator.baseUrl, under(emulator, '[::1]')]) {
      const refused = await ask(origin);
      expect(refused.status, origin).toBe(401);
      expect(refused.json().detail, origin).toMatch(/^the access token is for http:\/\/localhost:\d+\/mcp, not for /);
    }
  });

  it('a token for 127.0.0.1 (the default) is refused at localhost/mcp, and works at 127.0.0.1 as before', async () => {
    const emulator = await startEmulator();
    const { tokens } = await authorizeAndApprove(emulator);
    const send = (origin: string) =>
      http(`${origin}/mcp`, { method: 'POST', headers: bearer(tokens!.access_token, MCP_HEADERS), body: TOOLS_LIST });
    expect((await send(emulator.baseUrl)).status).toBe(200);
    const refused = await send(under(emulator, 'localhost'));
    expect(refused.status).toBe(401);
    expect(refused.headers['www-authenticate']).toContain('error="invalid_token"');
  });

  it('RFC 8707 §2.2: refresh keeps the name; asking for another name of the resource is invalid_target', async () => {
    const emulator = await startEmulator();
    const resource = `${under(emulator, '[::1]')}/mcp`;
    const { client_id, tokens } = await authorizeAndApprove(emulator, { resource });
    const other = await refresh(emulator.baseUrl, { client_id, refresh_token: tokens!.refresh_token, resource: `${emulator.baseUrl}/mcp` });
    expect(other.status).toBe(400);
    expect(other.json().error).toBe('invalid_target');
    const next = await refresh(emulator.baseUrl, { client_id, refresh_token: tokens!.refresh_token, resource });
    expect(next.status).toBe(200);
    expect(decodeJwt(next.json().access_token).payload.aud).toBe(resource);
  });
});

describe('both servers listen on ::1 too (bound to the default 127.0.0.1)', () => {
  it('{base_url} and {auth_url} answer at [::1] on their ports, and stop() frees those ports', async () => {
    const emulator = await startEmulator();
    const ports = [new URL(emulator.baseUrl).port, new URL(emulator.authUrl).port].map(Number);
    expect((await http(`http://[::1]:${ports[0]}/.well-known/oauth-authorization-server`)).status).toBe(200);
    expect((await http(`http://[::1]:${ports[1]}/settings`)).status).toBe(200);
    await emulator.stop();
    for (const port of ports) {
      const probe = createServer();
      await new Promise<void>((resolve, reject) => probe.once('error', reject).listen(port, '::1', resolve));
      await new Promise<void>((resolve) => probe.close(() => resolve()));
    }
  });

  it('RFC 6585 §5: [::1] has the same HTTP limits: 64 KB of header fields at /mcp get the same 431 there as at 127.0.0.1', async () => {
    const emulator = await startEmulator();
    const big = { ...MCP_HEADERS, 'x-filler': 'a'.repeat(64 * 1024) };
    const [at127, atIpv6] = await Promise.all(
      [emulator.baseUrl, under(emulator, '[::1]')].map((origin) =>
        http(`${origin}/mcp`, { method: 'POST', headers: big, body: TOOLS_LIST }),
      ),
    );
    expect(at127!.status).toBe(431);
    expect([atIpv6!.status, atIpv6!.headers['content-type'], atIpv6!.text]).toEqual([431, at127!.headers['content-type'], at127!.text]);
  });

  it('where [::1] cannot be listened on at the port, the emulator carries on with 127.0.0.1 and says so in one notice', async () => {
    const squatter = createServer();
    await new Promise<void>((resolve, reject) => squatter.once('error', reject).listen(0, '::1', resolve));
    const port = (squatter.address() as AddressInfo).port;
    try {
      const notices: string[] = [];
      const emulator = await startEmulator({ port, onNotice: (line) => notices.push(line) });
      expect(emulator.baseUrl).toBe(`http://127.0.0.1:${port}`);
      expect(notices).toEqual([expect.stringMatching(new RegExp(`^could not also listen on \\[::1\\]:${port} \\(EADDRINUSE\\)`))]);
      expect((await http(`${emulator.baseUrl}/.well-known/oauth-protected-resource/mcp`)).json().resource).toBe(`${emulator.baseUrl}/mcp`);
      expect((await http(`http://[::1]:${new URL(emulator.authUrl).port}/settings`)).status).toBe(200);
      await emulator.stop();
    } finally {
      await new Promise<void>((resolve) => squatter.close(() => resolve()));
    }
  });
});
