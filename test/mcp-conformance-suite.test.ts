/**
 * The official MCP conformance suite (@modelcontextprotocol/conformance) against this project: its server scenarios
 * against `/mcp` under 2026-07-28 and 2025-11-25, and its client auth scenarios against `agent-access login`.
 *
 * The suite needs Node 22 or later and is no dependency of the package: CI (.ci/run) installs it beside the Node
 * binaries it tests on and names both in AGENT_ACCESS_MCP_CONFORMANCE (its dist/index.js) and
 * AGENT_ACCESS_MCP_CONFORMANCE_NODE. Elsewhere the test is skipped unless they are set. What the server may fail, and
 * why (a tools-only service; the suite's own diagnostic tools), is in test/fixtures/mcp-conformance/*.yml, which the
 * suite itself enforces: an unexpected failure and a listed one that passes both fail the run.
 */
import { execFile } from 'node:child_process';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { issueTokensWithoutConsent } from '../src/core/oauth/issue-tokens.js';
import { scratchDir, startEmulator } from './helpers/emulator.js';

const SUITE = process.env.AGENT_ACCESS_MCP_CONFORMANCE;
const NODE = process.env.AGENT_ACCESS_MCP_CONFORMANCE_NODE ?? 'node';
const fixture = (name: string) => fileURLToPath(new URL(`fixtures/mcp-conformance/${name}`, import.meta.url));
const run = promisify(execFile);

/** Runs the suite; its exit code decides (0: every failure is a listed one, none listed passes). */
async function suite(args: string[], env: NodeJS.ProcessEnv = {}) {
  const cwd = await scratchDir(); // the client mode writes its results/ here
  try {
    await run(NODE, [SUITE!, ...args], { cwd, env: { ...process.env, ...env }, maxBuffer: 64 * 1024 * 1024 });
    return { code: 0, output: '' };
  } catch (e) {
    const err = e as { code?: number; stdout?: string; stderr?: string };
    return { code: err.code ?? 1, output: `${err.stdout ?? ''}\n${err.stderr ?? ''}` };
  }
}

describe.skipIf(!SUITE && !process.env.CI)('44.4: the official MCP conformance suite', () => {
  it('CI installs the suite (.ci/run), so it never skips there', () => {
    expect(SUITE, 'AGENT_ACCESS_MCP_CONFORMANCE is set by .ci/run').toBeTruthy();
  });

  /**
   * A fresh emulator for each run, behind a proxy that adds the bearer token (the suite has no auth option). The
   * proxy's own Host becomes the emulator's; any other (the suite's DNS-rebinding probes) passes unchanged.
   */
  async function behindProxy(): Promise<{ url: string; close: () => Promise<void> }> {
    // The scenarios make hundreds of tool calls in seconds: a window as wide as the suite needs.
    const emulator = await startEmulator({ rateLimit: '100000/min' });
    const { access_token } = await issueTokensWithoutConsent(emulator.core, {
      scopes: ['ask', 'research', 'training.write', 'workspace.write'],
    });
    const target = new URL(emulator.baseUrl);
    const proxy: Server = createServer((req, res) => {
      const own = req.headers.host === `127.0.0.1:${(proxy.address() as AddressInfo).port}`;
      const headers = { ...req.headers, authorization: `Bearer ${access_token}`, ...(own ? { host: target.host } : {}) };
      const upstream = request({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers }, (answer) => {
        res.writeHead(answer.statusCode!, answer.headers);
        answer.pipe(res);
      });
      upstream.on('error', () => res.destroy());
      res.on('close', () => upstream.destroy());
      req.pipe(upstream);
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    return {
      url: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}/mcp`,
      close: async () => {
        proxy.closeAllConnections();
        await new Promise((resolve) => proxy.close(resolve));
      },
    };
  }

  it.each(['2026-07-28', '2025-11-25'])(
    'server scenarios: what MCP %s requires of a server passes, but for what does not apply to a tools-only service',
    async (version) => {
      const { url, close } = await behindProxy();
      try {
        const result = await suite([
          'server',
          '--url',
          url,
          '--requirements',
          version,
          '--expected-failures',
          fixture(`server-${version}.yml`),
        ]);
        expect(result.code, result.output).toBe(0);
      } finally {
        await close();
      }
    },
    180_000,
  );

  // Applicability as the suite lists it: metadata-* under both revisions, the rest since 2026-07-28.
  const clientScenarios = [
    ...['auth/metadata-default', 'auth/metadata-var1', 'auth/metadata-var2', 'auth/metadata-var3'].flatMap((s) => [
      [s, '2025-11-25'],
      [s, '2026-07-28'],
    ]),
    ...[
      'auth/iss-supported',
      'auth/iss-not-advertised',
      'auth/iss-supported-missing',
      'auth/iss-wrong-issuer',
      'auth/iss-unexpected',
      'auth/iss-normalized',
      'auth/metadata-issuer-mismatch',
      'auth/authorization-server-migration',
    ].map((s) => [s, '2026-07-28']),
  ];
  it.each(clientScenarios)(
    'client scenario %s (MCP %s) passes with `agent-access login`',
    async (scenario, version) => {
      const command = `${process.execPath} ${fixture('login-client.mjs')}`;
      const result = await suite(['client', '--command', command, '--scenario', scenario, '--spec-version', version], {
        AGENT_ACCESS_CONFIG_DIR: await scratchDir(),
      });
      expect(result.code, result.output).toBe(0);
    },
    60_000,
  );
});
