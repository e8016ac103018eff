/**
 * Issue 42.5, proof that `conformance client` grades both ways, with clients of others: the MCP TypeScript SDK's
 * client, and a deliberately faulty client whose every defect fails the check that names it, while the same client
 * without defects fails nothing. The two clients are fixtures of their own (test/fixtures/conformance/).
 *
 * The proofs are in three files (conformance-proofs*.test.ts), which the test runner can run side by side: each
 * defect grades the whole suite, a run mostly spent waiting (rate-limited's Retry-After waits), and in one file the
 * runs came one after the other at the end of `npm test` with the other files done.
 */
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import { runClientConformance, type ConformanceReport } from '../../src/index.js';
import { runFaultyClient } from '../fixtures/conformance/faulty-client.mjs';

export const SDK_CLIENT = fileURLToPath(new URL('../fixtures/conformance/sdk-client.mjs', import.meta.url));
export const FAULTY_CLIENT = fileURLToPath(new URL('../fixtures/conformance/faulty-client.mjs', import.meta.url));

export const check = (report: ConformanceReport, id: string) => report.scenarios.flatMap((s) => s.checks).find((c) => c.id === id);
export const notPassed = (report: ConformanceReport) =>
  report.scenarios.flatMap((s) => s.checks.filter((c) => c.verdict !== 'pass').map((c) => `${c.id} ${c.verdict}: ${c.message}`));
export const figures = (report: ConformanceReport) =>
  report.scenarios.map((s) => `${s.name} ${s.verdict} ${(s.duration_ms / 1000).toFixed(1)} s`).join('; ');

/**
 * Each switch of the faulty client, the check that must name it, and every scenario it must fail: the one the issue
 * names, and those whose workload meets the same defect (rotation's three calls at once meet a parallel refresh; a
 * lost answer is a POST retry too; family-killed is judged as revoked is). Every other scenario must not fail. The
 * group says which file proves it: the defects of authorization and tokens, or those of the calls.
 */
const DEFECTS: ReadonlyArray<readonly [defect: string, check: string, scenarios: readonly string[], group: 'authorization' | 'calls']> = [
  ['parallel-refresh', 'parallel-expiry.one-refresh', ['parallel-expiry', 'rotation'], 'authorization'],
  ['ignore-retry-after', 'rate-limited.waits-retry-after', ['rate-limited'], 'calls'],
  ['post-retry-without-key', 'server-error.retry-with-key', ['server-error', 'lost-answer'], 'calls'],
  ['hot-poll', 'research-polling.interval', ['research-polling'], 'calls'],
  ['retry-revoked-refresh', 'revoked.no-refused-refresh-retry', ['revoked', 'family-killed'], 'authorization'],
  ['all-scopes', 'flow.minimal-scopes', ['flow'], 'authorization'],
  ['no-pkce', 'flow.pkce-state-resource', ['flow'], 'authorization'],
  ['no-resource', 'flow.pkce-state-resource', ['flow'], 'authorization'],
  ['unchecked-sources', 'shapes.exits-0', ['shapes'], 'calls'],
];
/**
 * A hot loop on the real clock of `shapes` can spend the grant's rate limit (60 a minute) before its job is done; the
 * client then gives up on a Retry-After over 10 s and exits 1. That failure is the defect's too, but it depends on how
 * fast the loop ran, so it may or may not come.
 */
const MAY_ALSO_FAIL: Record<string, readonly string[]> = { 'hot-poll': ['shapes'] };

/** A test per defect of the group: the faulty client with it fails exactly the scenarios that meet it. */
export function proveDefects(group: 'authorization' | 'calls'): void {
  it.each(DEFECTS.filter((d) => d[3] === group).map(([defect, id, scenarios]) => [defect, id, scenarios] as const))(
    '42.5 the defect %s fails exactly the scenarios that meet it, %s naming it',
    async (defect, id, scenarios) => {
      // In this process (runClientConformance's `client`): the grading is the same, and a suite spares twenty Node
      // starts. The faulty client without defects runs as a process (conformance-proofs.test.ts).
      const report = await runClientConformance({
        client: runFaultyClient,
        suite: 'all',
        timeout: '1m',
        env: { FAULTY_CLIENT_DEFECTS: defect },
      });
      const failed = report.scenarios.filter((s) => s.verdict === 'fail').map((s) => s.name);
      const unexpected = failed.filter((name) => !scenarios.includes(name) && !MAY_ALSO_FAIL[defect]?.includes(name));
      expect({ missing: scenarios.filter((name) => !failed.includes(name)), unexpected }, notPassed(report).join('\n')).toEqual({
        missing: [],
        unexpected: [],
      });
      expect(check(report, id), notPassed(report).join('\n')).toMatchObject({
        verdict: 'fail',
        rule: expect.any(String),
        hint: expect.any(String),
      });
    },
    300_000,
  );
}
