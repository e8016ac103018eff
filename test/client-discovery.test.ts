/**
 * The client's discovery as RFC 9728 §3 and §5 and the MCP authorization spec ("Protected Resource Metadata
 * Discovery", "Authorization Server Metadata Discovery") have it, against small metadata servers that each put the
 * documents somewhere else.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { systemClock } from '../src/core/state/clock.js';
import { HttpClient } from '../src/client/http.js';
import { discover } from '../src/client/oauth.js';

type Route = { status?: number; json?: unknown; headers?: Record<string, string> };

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

/** A server answering `routes(base)` by path (404 elsewhere), and the paths it was asked for, in order. */
async function metadataServer(routes: (base: string) => Record<string, Route>) {
  const asked: string[] = [];
  let table: Record<string, Route> = {};
  const server = createServer((req, res) => {
    asked.push(req.url!);
    const route = table[req.url!] ?? { status: 404, json: { error: 'not_found' } };
    res.writeHead(route.status ?? 200, { 'content-type': 'application/json', ...route.headers });
    res.end(JSON.stringify(route.json ?? {}));
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  table = routes(base);
  return { base, asked };
}

const asMetadata = (issuer: string) => ({
  issuer,
  authorization_endpoint: `${issuer}/authorize`,
  token_endpoint: `${issuer}/token`,
  registration_endpoint: `${issuer}/register`,
  response_types_supported: ['code'],
  code_challenge_methods_supported: ['S256'],
});
const prm = (base: string, issuer = base) => ({ resource: `${base}/mcp`, authorization_servers: [issuer] });
const unauthorized = (metadataUrl?: string): Route => ({
  status: 401,
  headers: { 'www-authenticate': metadataUrl ? `Bearer resource_metadata="${metadataUrl}"` : 'Bearer' },
});

const client = () =>
  new HttpClient({
    clock: systemClock,
    env: {},
    cwd: process.cwd(),
    stdout: process.stdout,
    stderr: process.stderr,
    openUrl: async () => undefined,
  });

async function discoverAt(base: string) {
  const http = client();
  try {
    return await discover(http, base);
  } finally {
    await http.close();
  }
}

describe('44.2: the client discovers as RFC 9728 and the MCP authorization spec say', () => {
  it("RFC 9728 §5.1: the 401's resource_metadata is followed first, wherever it points", async () => {
    const { base, asked } = await metadataServer((base) => ({
      '/mcp': unauthorized(`${base}/elsewhere/prm.json`),
      '/elsewhere/prm.json': { json: prm(base) },
      '/.well-known/oauth-authorization-server': { json: asMetadata(base) },
    }));
    const found = await discoverAt(base);
    expect(found.resource).toBe(`${base}/mcp`);
    expect(found.as.issuer).toBe(base);
    expect(asked).toEqual(['/mcp', '/elsewhere/prm.json', '/.well-known/oauth-authorization-server']);
  });

  it('RFC 9728 §3.1: without resource_metadata, the path-based metadata, then the root metadata', async () => {
    const { base, asked } = await metadataServer((base) => ({
      '/mcp': unauthorized(),
      '/.well-known/oauth-protected-resource': { json: prm(base) },
      '/.well-known/oauth-authorization-server': { json: asMetadata(base) },
    }));
    expect((await discoverAt(base)).resource).toBe(`${base}/mcp`);
    expect(asked.slice(0, 3)).toEqual(['/mcp', '/.well-known/oauth-protected-resource/mcp', '/.well-known/oauth-protected-resource']);
  });

  it('MCP authorization: without RFC 8414 metadata, OpenID Connect Discovery', async () => {
    const { base, asked } = await metadataServer((base) => ({
      '/mcp': unauthorized(),
      '/.well-known/oauth-protected-resource/mcp': { json: prm(base) },
      '/.well-known/openid-configuration': { json: asMetadata(base) },
    }));
    expect((await discoverAt(base)).as.issuer).toBe(base);
    expect(asked.slice(2)).toEqual(['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration']);
  });

  it('RFC 8414 §3.1, MCP authorization: an issuer with a path: path-inserted, then both OpenID forms, never the root', async () => {
    const { base, asked } = await metadataServer((base) => ({
      '/mcp': unauthorized(),
      '/.well-known/oauth-protected-resource/mcp': { json: prm(base, `${base}/tenant`) },
      // The root document belongs to another issuer: it is not asked for.
      '/.well-known/oauth-authorization-server': { json: asMetadata(base) },
      '/tenant/.well-known/openid-configuration': { json: asMetadata(`${base}/tenant`) },
    }));
    expect((await discoverAt(base)).as.issuer).toBe(`${base}/tenant`);
    expect(asked.slice(2)).toEqual([
      '/.well-known/oauth-authorization-server/tenant',
      '/.well-known/openid-configuration/tenant',
      '/tenant/.well-known/openid-configuration',
    ]);
  });

  it('RFC 9728 §3.3: the root metadata may describe the origin; its resource is then the one asked for', async () => {
    const { base } = await metadataServer((base) => ({
      '/mcp': unauthorized(),
      '/.well-known/oauth-protected-resource': { json: { resource: base, authorization_servers: [base] } },
      '/.well-known/oauth-authorization-server': { json: asMetadata(base) },
    }));
    expect((await discoverAt(base)).resource).toBe(base);
  });

  it('RFC 9728 §3.3, RFC 8414 §3.3: metadata naming another resource or issuer is never used; the error says what each URL answered', async () => {
    const wrongResource = await metadataServer((base) => ({
      '/mcp': unauthorized(),
      '/.well-known/oauth-protected-resource/mcp': { json: { ...prm(base), resource: 'https://elsewhere.example/mcp' } },
    }));
    await expect(discoverAt(wrongResource.base)).rejects.toThrow(
      /resource metadata .* failed: .*oauth-protected-resource\/mcp: .*resource.*; .*oauth-protected-resource: HTTP 404/,
    );
    const wrongIssuer = await metadataServer((base) => ({
      '/mcp': unauthorized(),
      '/.well-known/oauth-protected-resource/mcp': { json: prm(base) },
      '/.well-known/oauth-authorization-server': { json: asMetadata('https://elsewhere.example') },
    }));
    await expect(discoverAt(wrongIssuer.base)).rejects.toThrow(/authorization server .* failed: .*issuer/);
  });
});
