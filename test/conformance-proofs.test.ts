/**
 * Issue 42.5 with the clients of others (helpers/conformance-proofs.ts): the MCP TypeScript SDK's client (its known
 * parallel refresh fails parallel-expiry, with the cause named), and the faulty sample client without defects. Each
 * defect of the faulty client is proven in conformance-proofs-authorization and conformance-proofs-calls.
 */
import { describe, expect, it } from 'vitest';
import { runClientConformance } from '../src/index.js';
import { check, FAULTY_CLIENT, figures, notPassed, SDK_CLIENT } from './helpers/conformance-proofs.js';

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

describe('42.2 an MCP client through rate-limited and server-error (each tool faulted on its own)', () => {
  it('42.2 SDK client that waits Retry-After and repeats with its idempotency_key passes rate-limited and server-error; one that repeats at once fails rate-limited.waits-retry-after on tool ask', async () => {
    const waits = await runClientConformance({
      command: process.execPath,
      args: [SDK_CLIENT],
      env: { SDK_CLIENT_RETRY: 'after', SDK_CLIENT_ROUNDS: '1' },
      scenarios: ['rate-limited', 'server-error'],
      timeout: '1m',
    });
    const hurries = await runClientConformance({
      command: process.execPath,
      args: [SDK_CLIENT],
      env: { SDK_CLIENT_RETRY: 'at-once', SDK_CLIENT_ROUNDS: '1' },
      scenarios: ['rate-limited'],
      timeout: '1m',
    });
    console.log(`MCP SDK client with retries: ${figures(waits)}; at once: ${figures(hurries)}`);
    expect(waits.summary, notPassed(waits).join('\n')).toEqual({ pass: 2, fail: 0, not_exercised: 0 });
    expect(check(waits, 'rate-limited.eventually-succeeds')?.message).toMatch(/1 route/);
    expect(check(waits, 'server-error.retry-with-key')?.message).toMatch(/1 retry, each with the first send's key and body/);
    expect(check(hurries, 'rate-limited.waits-retry-after')).toMatchObject({
      verdict: 'fail',
      message: expect.stringMatching(/^tool ask: the next call came [\d.]+ s after a 429 whose Retry-After asked to wait 2 s/),
    });
  }, 120_000);
});

describe('42.5 the faulty sample client', () => {
  it('42.5 without defects it fails no scenario, and passes the core suite', async () => {
    const report = await runClientConformance({ command: process.execPath, args: [FAULTY_CLIENT], suite: 'all', timeout: '1m' });
    console.log(`faulty client without defects: ${figures(report)}`);
    expect(report.summary.fail, notPassed(report).join('\n')).toBe(0);
    for (const name of ['flow', 'expiry', 'rotation', 'revoked'])
      expect(report.scenarios.find((s) => s.name === name)?.verdict, name).toBe('pass');
  }, 300_000);
});
