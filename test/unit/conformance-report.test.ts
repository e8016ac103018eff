/**
 * Issue 42.3: the report of `conformance client`, its verdict rules, the table and JUnit XML; and the reference of
 * docs/conformance.md held to the checks' own definitions.
 */
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { CHECKS } from '../../src/conformance/checks.js';
import {
  formatJunit,
  formatTable,
  scenarioVerdict,
  summarize,
  xmlEscape,
  type CheckReport,
  type ConformanceReport,
} from '../../src/conformance/report.js';
import { ConformanceUsageError, selectScenarios } from '../../src/conformance/runner.js';
import { SCENARIOS, SHAPE_RUNS, SHAPES_SEED, SUITES } from '../../src/conformance/scenarios.js';
import { TOOL_SCOPES } from '../../src/server/mcp-tools.js';
import { CATALOGUE, selectVariant, type VariedKind } from '../../src/core/emulation/variation.js';

const passed: CheckReport = { id: 'flow.bearer', verdict: 'pass', rule: 'RFC 6750 §2.1', message: '3 calls' };
const unexercised: CheckReport = { id: 'parallel-expiry.one-refresh', verdict: 'not_exercised', rule: 'spec 3.2', message: 'never two' };
const failed: CheckReport = {
  id: 'rate-limited.waits-retry-after',
  verdict: 'fail',
  rule: 'RFC 9110 §10.2.3; spec 7',
  message: 'POST /chat/ask: the next call came 0.01 s after a 429 <&> "x" \'y\'\u0001',
  hint: 'wait',
};

const report = (checks: CheckReport[][]): ConformanceReport => {
  const scenarios = checks.map((c, i) => ({
    name: `s${i}`,
    description: 'd',
    verdict: scenarioVerdict(c),
    exit_code: 0,
    duration_ms: 1200,
    checks: c,
  }));
  return { version: 1, command: ['node', 'agent.js'], scenarios, summary: summarize(scenarios) };
};

describe('42.3 the report', () => {
  it('42.2 a scenario fails when a check failed, passes when none failed and one passed, else is not_exercised', () => {
    expect(scenarioVerdict([passed, failed, unexercised])).toBe('fail');
    expect(scenarioVerdict([passed, unexercised])).toBe('pass');
    expect(scenarioVerdict([unexercised])).toBe('not_exercised');
    expect(scenarioVerdict([])).toBe('not_exercised');
    expect(report([[passed], [failed], [unexercised]]).summary).toEqual({ pass: 1, fail: 1, not_exercised: 1 });
  });

  it('42.1 the table names each failed check with its rule, what was seen and the hint, and the totals', () => {
    const table = formatTable(report([[passed], [failed, unexercised]]));
    expect(table).toMatch(/^s1 +fail +1\.2 s$/m);
    expect(table).toContain('FAIL rate-limited.waits-retry-after (RFC 9110 §10.2.3; spec 7)');
    expect(table).toContain('hint: wait');
    expect(table).not.toContain('flow.bearer');
    expect(table).toMatch(/1 passed, 1 failed, 0 not exercised\n$/);
  });

  it('42.1 JUnit: one testcase per check, failures and skips as such, every text escaped for XML 1.0', () => {
    const xml = formatJunit(report([[passed], [failed, unexercised]]));
    expect(xml.match(/<testcase /g)).toHaveLength(3);
    expect(xml).toMatch(/<testsuites [^>]*tests="3" failures="1" skipped="1">/);
    expect(xml).toContain('<skipped message="never two" />');
    expect(xml).toContain('after a 429 &lt;&amp;&gt; &quot;x&quot; &apos;y&apos;');
    // A control character has no place in XML 1.0, not even escaped.
    expect(xml).not.toContain('\u0001');
    expect(xmlEscape('a\ud800b\u{1f600}')).toBe('ab\u{1f600}');
  });
});

describe('42.2 the scenarios', () => {
  it('42.2 core is flow, expiry, rotation, revoked; resilience the rest; all every one', () => {
    expect(SUITES.core).toEqual(['flow', 'expiry', 'rotation', 'revoked']);
    expect([...SUITES.core, ...SUITES.resilience].sort()).toEqual([...SUITES.all].sort());
    expect(selectScenarios({ suite: 'core', scenarios: ['shapes'] }).map((s) => s.name)).toEqual([
      'flow',
      'expiry',
      'rotation',
      'revoked',
      'shapes',
    ]);
    expect(selectScenarios({}).length).toBe(SCENARIOS.length);
    expect(() => selectScenarios({ scenarios: ['nope'] })).toThrow(ConformanceUsageError);
    expect(() => selectScenarios({ suite: 'nope' as 'all' })).toThrow(ConformanceUsageError);
  });

  it('42.2 shapes: over its consecutive seeds every variant of every dimension comes up on the first object of its kind', () => {
    for (const [kind, dimensions] of Object.entries(CATALOGUE))
      for (const [dimension, variants] of Object.entries(dimensions)) {
        const seen = new Set(
          Array.from(
            { length: SHAPE_RUNS },
            (_, i) => (selectVariant(SHAPES_SEED + i, kind as VariedKind, 0).choices as Record<string, string>)[dimension],
          ),
        );
        expect([...seen].sort(), `${kind}.${dimension}`).toEqual([...variants].sort());
      }
  });

  it('42.2 rate-limited arms two 429s (Retry-After 2) on each allowlist route and on each MCP tool by name; server-error one 503 on each allowlist POST and its MCP tool', () => {
    const faults = (name: string) => SCENARIOS.find((s) => s.name === name)!.options!(0).faults ?? [];
    const limited = faults('rate-limited');
    expect(limited.every((f) => f.kind === 'rate_limit' && f.count === 2 && f.retry_after === 2)).toBe(true);
    expect(limited.filter((f) => f.tool).map((f) => f.tool)).toEqual(Object.keys(TOOL_SCOPES));
    expect(limited.filter((f) => f.route).map((f) => f.route)).toEqual(
      expect.arrayContaining(['POST /chat/ask', 'GET /research/{job_id}']),
    );
    expect(limited.some((f) => f.route === 'POST /mcp')).toBe(false);
    const failing = faults('server-error');
    expect(failing.map((f) => [f.kind, f.status, f.count, f.route ?? `tool ${f.tool}`])).toEqual(
      ['POST /chat/ask', 'POST /research', 'POST /training', 'tool ask', 'tool start_research', 'tool add_training_document'].map(
        (where) => ['server_error', 503, 1, where],
      ),
    );
  });

  it('every check belongs to a scenario by its prefix', () => {
    const names = new Set(SCENARIOS.map((s) => s.name));
    for (const id of Object.keys(CHECKS)) expect(names.has(id.slice(0, id.lastIndexOf('.'))), id).toBe(true);
  });

  it('docs/conformance.md lists every scenario and every check with the rule it rests on, and nothing else', async () => {
    const doc = await readFile(new URL('../../docs/conformance.md', import.meta.url), 'utf8');
    const rows = [...doc.matchAll(/^\| `([a-z-]+\.[a-z0-9-]+)` \| ([^|]+) \|/gm)].map((m) => [m[1], m[2]!.trim()]);
    expect(rows).toEqual(
      Object.entries(CHECKS)
        .map(([id, c]) => [id, c.rule])
        .sort((a, b) => order(a[0]!) - order(b[0]!)),
    );
    for (const s of SCENARIOS) expect(doc).toContain(`### \`${s.name}\` (${s.suite})`);
  });
});

/** Checks in the order the doc lists them: by scenario, then as defined. */
const ids = Object.keys(CHECKS);
const order = (id: string) => SCENARIOS.findIndex((s) => id.startsWith(`${s.name}.`)) * 100 + ids.indexOf(id);
