/**
 * Issue 42.5, proof that `conformance client` grades both ways, with clients of others: the MCP TypeScript SDK's
 * client (its known parallel refresh fails parallel-expiry, with the cause named), and a deliberately faulty client
 * whose every defect fails the check that names it, while the same client without defects fails nothing.
 * The two clients are fixtures of their own (test/fixtures/conformance/).
 */
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runClientConformance, type ConformanceReport } from '../src/index.js';

const SDK_CLIENT = fileURLToPath(new URL('./fixtures/conformance/sdk-client.mjs', import.meta.url));
const FAULTY_CLIENT = fileURLToPath(new URL('./fixtures/conformance/faulty-client.mjs', import.meta.url));

const check = (report: ConformanceReport, id: string) => report.scenarios.flatMap((s) => s.checks).find((c) => c.id === id);
const notPassed = (report: ConformanceReport) =>
  report.scenarios.flatMap((s) => s.checks.filter((c) => c.verdict !== 'pass').map((c) => `${c.id} ${c.verdict}: ${c.message}`));
const figures = (report: ConformanceReport) =>
  report.scenarios.map((s) => `${s.name} ${s.verdict} ${(s.duration_ms / 1000).toFixed(1)} s`).join('; ');

describe('42.5 the MCP TypeScript SDK client', () => {
  it('42.5 SDK: flow and expiry hold; its parallel refresh with one refresh token fails parallel-expiry.one-refresh, the cause named', async () => {
    // One call at a time through flow and expiry; in parallel-expiry its later calls three at a time, as an agent
    // that calls tools in parallel does.
    const sequential = await runClientConformance({
      command: process.execPath,
      args: [SDK_CLIENT],
      scenarios: ['flow', 'expiry'],
      timeout: '1m',
    });
    const report = await runClientConformance({
      command: process.execPath,
      args: [SDK_CLIENT],
      env: { SDK_CLIENT_PARALLEL: '3' },
      scenarios: ['parallel-expiry'],
      timeout: '1m',
    });
    console.log(
      `MCP SDK client: ${figures(sequential)}; ${figures(report)}\n${[...notPassed(sequential), ...notPassed(report)].join('\n')}`,
    );
    for (const id of [
      'flow.discovery',
      'flow.pkce-state-resource',
      'flow.code-once',
      'flow.bearer',
      'expiry.refreshes',
      'expiry.repeat-succeeds',
    ])
      expect(check(sequential, id)?.verdict, id).toBe('pass');
    expect(check(report, 'parallel-expiry.one-refresh')).toMatchObject({
      verdict: 'fail',
      message: expect.stringMatching(/calls were in flight .*refreshes in parallel with one token/),
      hint: expect.stringMatching(/^Refresh once per token family/),
    });
    expect(check(report, 'parallel-expiry.family-lives')?.verdict).toBe('fail');
  }, 180_000);
});

/** Each switch of the faulty client, the scenario it must fail, and the check that must name it. */
const DEFECTS = [
  ['parallel-refresh', 'parallel-expiry', 'parallel-expiry.one-refresh'],
  ['ignore-retry-after', 'rate-limited', 'rate-limited.waits-retry-after'],
  ['post-retry-without-key', 'server-error', 'server-error.retry-with-key'],
  ['hot-poll', 'research-polling', 'research-polling.interval'],
  ['retry-revoked-refresh', 'revoked', 'revoked.no-refused-refresh-retry'],
  ['all-scopes', 'flow', 'flow.minimal-scopes'],
  ['no-pkce', 'flow', 'flow.pkce-state-resource'],
  ['no-resource', 'flow', 'flow.pkce-state-resource'],
  ['unchecked-sources', 'shapes', 'shapes.exits-0'],
] as const;

describe('42.5 the faulty sample client', () => {
  it('42.5 without defects it fails no scenario, and passes the core suite', async () => {
    const report = await runClientConformance({ command: process.execPath, args: [FAULTY_CLIENT], suite: 'all', timeout: '1m' });
    console.log(`faulty client without defects: ${figures(report)}`);
    expect(report.summary.fail, notPassed(report).join('\n')).toBe(0);
    for (const name of ['flow', 'expiry', 'rotation', 'revoked'])
      expect(report.scenarios.find((s) => s.name === name)?.verdict, name).toBe('pass');
  }, 300_000);

  it.each(DEFECTS)(
    '42.5 the defect %s fails %s on %s',
    async (defect, scenario, id) => {
      const report = await runClientConformance({
        command: process.execPath,
        args: [FAULTY_CLIENT],
        scenarios: [scenario],
        timeout: '1m',
        env: { FAULTY_CLIENT_DEFECTS: defect },
      });
      expect(report.scenarios[0]!.verdict, notPassed(report).join('\n')).toBe('fail');
      expect(check(report, id), notPassed(report).join('\n')).toMatchObject({
        verdict: 'fail',
        rule: expect.any(String),
        hint: expect.any(String),
      });
    },
    120_000,
  );
});
