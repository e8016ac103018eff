/**
 * `/mcp` under every MCP protocol version current clients send: 2026-07-28 (each request carries its version in
 * `_meta`, no `initialize`), and the 2025 revisions with their handshake (MCP transports, "Protocol Version Header";
 * MCP 2026-07-28 lifecycle, "Version negotiation"). The tools themselves run under each version in mcp.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { MINUTE, ManualClock } from '../../src/core/state/clock.js';
import { listGrants, revokeGrant } from '../../src/core/oauth/grants-admin.js';
import { issueTokensWithoutConsent } from '../../src/core/oauth/issue-tokens.js';
import type { Emulator } from '../../src/server/emulator.js';
import { startInProcess } from '../helpers/emulator.js';
import { connectWithOAuth } from '../helpers/mcp-client.js';
import { http } from '../helpers/oauth.js';

const MODERN = '2026-07-28';

/** A request's `_meta` as a 2026-07-28 client sends it. */
const envelope = (version: string) => ({
  'io.modelcontextprotocol/protocolVersion': version,
  'io.modelcontextprotocol/clientInfo': { name: 'probe', version: '1' },
  'io.modelcontextprotocol/clientCapabilities': {},
});

async function post(emulator: Emulator, headers: Record<string, string>, body: object) {
  const { access_token } = await issueTokensWithoutConsent(emulator.core, { scopes: ['ask'] });
  return postWith(emulator, access_token, headers, body);
}

async function postWith(emulator: Emulator, access_token: string, headers: Record<string, string>, body: object) {
  const res = await http(`${emulator.baseUrl}/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${access_token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...headers,
    },
    body: JSON.stringify(body),
  });
  return {
    status: res.status,
    message: res.json() as { id: unknown; result?: any; error?: { code: number; message: string; data?: any } },
  };
}

describe('44.1: /mcp speaks 2026-07-28 and the 2025 revisions', () => {
  it('44.4: SDK 2 pinned to 2026-07-28: discovery, registration, consent, ask, a refresh after expiry and a revocation', async () => {
    const clock = new ManualClock();
    const emulator = await startInProcess({ clock });
    const refreshed: unknown[] = [];
    emulator.core.events.subscribe((e) => e.name === 'refresh.rotated' && refreshed.push(e));
    const { client } = await connectWithOAuth(emulator, 'ask', undefined, MODERN);
    const ask = () => client.callTool({ name: 'ask', arguments: { question: 'Wann kommt der Hufschmied?' } });
    expect((await ask()).structuredContent).toMatchObject({ outcome: 'answered' });
    // Spec 5.3: access tokens live 15 minutes; the SDK refreshes (rotation) on the 401 and repeats the call.
    clock.advance(16 * MINUTE);
    expect((await ask()).structuredContent).toMatchObject({ outcome: 'answered' });
    expect(refreshed).toHaveLength(1);
    // Spec 3.3, 5.7: revoked by the person, refused from the next request on, the refresh token included.
    await revokeGrant(emulator.core, listGrants(emulator.core)[0]!.id, 'person');
    await expect(ask()).rejects.toThrow();
    await client.close();
  });

  it('44.1: a 2026-07-28 request naming a version the server does not serve: 400, -32022 with the supported versions, the request id kept', async () => {
    const emulator = await startInProcess();
    const { status, message } = await post(
      emulator,
      { 'mcp-protocol-version': '2099-01-01', 'mcp-method': 'tools/list' },
      { jsonrpc: '2.0', id: 41, method: 'tools/list', params: { _meta: envelope('2099-01-01') } },
    );
    expect(status).toBe(400);
    expect(message).toMatchObject({ id: 41, error: { code: -32022, data: { supported: [MODERN], requested: '2099-01-01' } } });
  });

  it('44.1: a 2025 request with an unsupported MCP-Protocol-Version header: 400 naming the versions, with the request id, never null', async () => {
    const emulator = await startInProcess();
    const { status, message } = await post(
      emulator,
      { 'mcp-protocol-version': '1999-01-01' },
      { jsonrpc: '2.0', id: 42, method: 'tools/list' },
    );
    expect(status).toBe(400);
    expect(message.id).toBe(42);
    expect(message.error?.message).toMatch(/Unsupported protocol version: 1999-01-01.*2025-11-25/);
  });

  it.each(['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'])(
    '44.1: the 2025-era version %s (header) lists the tools, answered as JSON',
    async (version) => {
      const emulator = await startInProcess();
      const { status, message } = await post(
        emulator,
        { 'mcp-protocol-version': version },
        { jsonrpc: '2.0', id: 1, method: 'tools/list' },
      );
      expect(status).toBe(200);
      expect(message.result.tools.map((t: { name: string }) => t.name)).toContain('ask');
    },
  );

  it('44.1: initialize with a version the server does not know is answered with the newest 2025 revision (the client decides)', async () => {
    const emulator = await startInProcess();
    const { status, message } = await post(
      emulator,
      {},
      {
        jsonrpc: '2.0',
        id: 3,
        method: 'initialize',
        params: { protocolVersion: '1999-01-01', capabilities: {}, clientInfo: { name: 'old', version: '1' } },
      },
    );
    expect(status).toBe(200);
    expect(message.result).toMatchObject({ protocolVersion: '2025-11-25', capabilities: { tools: {} } });
  });

  it('44.1: server/discover under 2026-07-28 names the version and the tools capability', async () => {
    const emulator = await startInProcess();
    const { status, message } = await post(
      emulator,
      { 'mcp-protocol-version': MODERN, 'mcp-method': 'server/discover' },
      { jsonrpc: '2.0', id: 5, method: 'server/discover', params: { _meta: envelope(MODERN) } },
    );
    expect(status).toBe(200);
    expect(JSON.stringify(message.result)).toContain(MODERN);
    expect(message.result.capabilities).toMatchObject({ tools: {} });
  });

  it('44.1: under 2026-07-28 a tool call varies as under 2025 (--vary-unspecified names it in _meta), and a fault shapes it alike', async () => {
    const emulator = await startInProcess({ varyUnspecified: { seed: 9 }, rateLimit: '100/min' });
    const { access_token } = await issueTokensWithoutConsent(emulator.core, { scopes: ['ask'] });
    const ask = (version: string, id: number) =>
      postWith(
        emulator,
        access_token,
        version === MODERN
          ? { 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': 'ask' }
          : { 'mcp-protocol-version': version },
        {
          jsonrpc: '2.0',
          id,
          method: 'tools/call',
          params: {
            name: 'ask',
            arguments: { question: 'Wann kommt der Hufschmied?' },
            ...(version === MODERN ? { _meta: envelope(MODERN) } : {}),
          },
        },
      );
    const modern = await ask(MODERN, 1);
    const legacy = await ask('2025-11-25', 2);
    expect(modern.status).toBe(200);
    expect(modern.message.result._meta['agent-access/variant']).toMatch(/^seed=9, ordinal=\d+, ask\.sources=/);
    expect(legacy.message.result._meta['agent-access/variant']).toMatch(/^seed=9, ordinal=\d+, ask\.sources=/);
    emulator.faults.arm({ kind: 'rate_limit', route: 'POST /mcp', count: 1, retry_after: 7 });
    const limited = await ask(MODERN, 3);
    expect(limited.status).toBe(429);
  });
});
