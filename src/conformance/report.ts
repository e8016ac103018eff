/**
 * The verdict of `agent-access conformance client` (`--json`, and what `runClientConformance` resolves to), and its
 * renderings: the table on stdout and JUnit XML for CI systems.
 */

export type Verdict = 'pass' | 'fail' | 'not_exercised';

export interface CheckReport {
  /** `scenario.check`, e.g. `rate-limited.waits-retry-after`. */
  id: string;
  verdict: Verdict;
  /** The spec section or RFC clause the check rests on. */
  rule: string;
  /** What the emulator saw (counts and times). */
  message: string;
  /** What to change in the client; on failed checks. */
  hint?: string;
}

export interface ScenarioReport {
  name: string;
  description: string;
  verdict: Verdict;
  /** The command's exit status (the last run's for `shapes`); null when it was killed (timeout) or never started. */
  exit_code: number | null;
  duration_ms: number;
  /** True when the command was still running at `--timeout` and was killed. */
  timed_out?: boolean;
  checks: CheckReport[];
}

export interface ConformanceReport {
  version: 1;
  command: string[];
  scenarios: ScenarioReport[];
  /** Scenarios by verdict. */
  summary: Record<Verdict, number>;
}

/** A scenario fails when a check failed, passes when none failed and at least one was exercised. */
export function scenarioVerdict(checks: readonly CheckReport[]): Verdict {
  if (checks.some((c) => c.verdict === 'fail')) return 'fail';
  return checks.some((c) => c.verdict === 'pass') ? 'pass' : 'not_exercised';
}

export function summarize(scenarios: readonly ScenarioReport[]): Record<Verdict, number> {
  const summary: Record<Verdict, number> = { pass: 0, fail: 0, not_exercised: 0 };
  for (const s of scenarios) summary[s.verdict]++;
  return summary;
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** The table on stdout: scenario, verdict, time, and under a failed scenario each failed check with its reason and hint. */
export function formatTable(report: ConformanceReport): string {
  const width = Math.max(8, ...report.scenarios.map((s) => s.name.length));
  const lines = [`${'scenario'.padEnd(width)}  ${'verdict'.padEnd(13)}  time`];
  for (const s of report.scenarios) {
    lines.push(`${s.name.padEnd(width)}  ${s.verdict.padEnd(13)}  ${seconds(s.duration_ms)}${s.timed_out ? '  (timed out)' : ''}`);
    for (const c of s.checks.filter((check) => check.verdict === 'fail')) {
      lines.push(`  FAIL ${c.id} (${c.rule})`, `       ${c.message}`);
      if (c.hint) lines.push(`       hint: ${c.hint}`);
    }
  }
  const { pass, fail, not_exercised } = report.summary;
  lines.push('', `${pass} passed, ${fail} failed, ${not_exercised} not exercised`);
  return `${lines.join('\n')}\n`;
}

/** XML 1.0 text: the five entities, and characters XML cannot carry at all left out. */
export function xmlEscape(text: string): string {
  return text
    .replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]/g, '')
    .replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '')
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&apos;');
}

/** JUnit XML: one testsuite per scenario, one testcase per check; not_exercised checks are skipped. */
export function formatJunit(report: ConformanceReport): string {
  const count = (s: ScenarioReport, v: Verdict) => s.checks.filter((c) => c.verdict === v).length;
  const all = report.scenarios.flatMap((s) => s.checks);
  const out = [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<testsuites name="${xmlEscape(`agent-access conformance client: ${report.command.join(' ')}`)}" tests="${all.length}" failures="${all.filter((c) => c.verdict === 'fail').length}" skipped="${all.filter((c) => c.verdict === 'not_exercised').length}">`,
  ];
  for (const s of report.scenarios) {
    out.push(
      `  <testsuite name="${xmlEscape(s.name)}" tests="${s.checks.length}" failures="${count(s, 'fail')}" skipped="${count(s, 'not_exercised')}" time="${(s.duration_ms / 1000).toFixed(3)}">`,
    );
    for (const c of s.checks) {
      const open = `    <testcase classname="${xmlEscape(s.name)}" name="${xmlEscape(c.id)}">`;
      if (c.verdict === 'pass') out.push(`${open.slice(0, -1)} />`);
      else if (c.verdict === 'not_exercised') out.push(open, `      <skipped message="${xmlEscape(c.message)}" />`, '    </testcase>');
      else
        out.push(
          open,
          `      <failure message="${xmlEscape(c.message)}" type="${xmlEscape(c.rule)}">${xmlEscape(`${c.message}\nrule: ${c.rule}${c.hint ? `\nhint: ${c.hint}` : ''}`)}</failure>`,
          '    </testcase>',
        );
    }
    out.push('  </testsuite>');
  }
  out.push('</testsuites>');
  return `${out.join('\n')}\n`;
}
