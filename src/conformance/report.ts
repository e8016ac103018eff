/**
 * The verdict of `agent-access conformance client` (`--json`, and what `runClientConformance` resolves to) and of
 * `conformance server`, and their renderings: the table on stdout and JUnit XML for CI systems.
 */

/** `skipped`: a `conformance server` check the run's flags did not allow (its message says which flag). */
export type Verdict = 'pass' | 'fail' | 'not_exercised' | 'skipped';

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
  /** `conformance server`, on a failed check: the request that was sent and what came back. */
  sent?: string;
  received?: string;
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
  /** `server` for `conformance server`, whose scenarios are the groups of its checks; absent for `conformance client`. */
  kind?: 'server';
  command: string[];
  scenarios: ScenarioReport[];
  /** `conformance client`: scenarios by verdict (pass, fail, not_exercised). `conformance server`: checks by verdict (pass, fail, skipped). */
  summary: Partial<Record<Verdict, number>>;
  /** `conformance server`: the server checked. */
  base_url?: string;
  /** `conformance server`: what the server does where the spec says "not shown" (never a pass or a fail). */
  observations?: Record<string, unknown>;
  /** `conformance server`: the charged calls it made (each with an Idempotency-Key, so each charged once at most). */
  charges?: { calls: number; routes: Record<string, number>; note: string };
}

/** A scenario fails when a check failed, passes when none failed and at least one was exercised. */
export function scenarioVerdict(checks: readonly CheckReport[]): Verdict {
  if (checks.some((c) => c.verdict === 'fail')) return 'fail';
  return checks.some((c) => c.verdict === 'pass') ? 'pass' : 'not_exercised';
}

export function summarize(scenarios: readonly ScenarioReport[]): Partial<Record<Verdict, number>> {
  const summary: Partial<Record<Verdict, number>> = { pass: 0, fail: 0, not_exercised: 0 };
  for (const s of scenarios) summary[s.verdict] = (summary[s.verdict] ?? 0) + 1;
  return summary;
}

/** `conformance server` counts checks: pass, fail, skipped. */
export function summarizeChecks(checks: readonly CheckReport[]): Partial<Record<Verdict, number>> {
  const summary: Partial<Record<Verdict, number>> = { pass: 0, fail: 0, skipped: 0 };
  for (const c of checks) summary[c.verdict] = (summary[c.verdict] ?? 0) + 1;
  return summary;
}

const SUMMARY_WORDS: Record<Verdict, string> = { pass: 'passed', fail: 'failed', not_exercised: 'not exercised', skipped: 'skipped' };
const summaryLine = (summary: Partial<Record<Verdict, number>>) =>
  (Object.keys(SUMMARY_WORDS) as Verdict[])
    .filter((v) => summary[v] !== undefined)
    .map((v) => `${summary[v]} ${SUMMARY_WORDS[v]}`)
    .join(', ');

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** The table on stdout: scenario, verdict, time, and under a failed scenario each failed check with its reason and hint. */
export function formatTable(report: ConformanceReport): string {
  if (report.kind === 'server') return formatServerTable(report);
  const width = Math.max(8, ...report.scenarios.map((s) => s.name.length));
  const lines = [`${'scenario'.padEnd(width)}  ${'verdict'.padEnd(13)}  time`];
  for (const s of report.scenarios) {
    lines.push(`${s.name.padEnd(width)}  ${s.verdict.padEnd(13)}  ${seconds(s.duration_ms)}${s.timed_out ? '  (timed out)' : ''}`);
    for (const c of s.checks.filter((check) => check.verdict === 'fail')) {
      lines.push(`  FAIL ${c.id} (${c.rule})`, `       ${c.message}`);
      if (c.hint) lines.push(`       hint: ${c.hint}`);
    }
  }
  lines.push('', summaryLine(report.summary));
  return `${lines.join('\n')}\n`;
}

/**
 * `conformance server`: one line per check (id, verdict, rule; a skipped check says which flag it needs), under a
 * failed one what was sent and what came back; then the counts and the charges the run may have made.
 */
function formatServerTable(report: ConformanceReport): string {
  const checks = report.scenarios.flatMap((s) => s.checks);
  const width = Math.max(5, ...checks.map((c) => c.id.length));
  const lines = [`${'check'.padEnd(width)}  ${'verdict'.padEnd(7)}  rule`];
  for (const c of checks) {
    lines.push(`${c.id.padEnd(width)}  ${c.verdict.padEnd(7)}  ${c.verdict === 'skipped' ? c.message : c.rule}`);
    if (c.verdict !== 'fail') continue;
    lines.push(`  ${c.message}`);
    if (c.sent) lines.push(`  sent:     ${c.sent}`);
    if (c.received) lines.push(`  received: ${c.received}`);
  }
  lines.push('', `${summaryLine(report.summary)} (${report.base_url ?? ''})`);
  if (report.charges) lines.push(report.charges.note);
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

/** Neither pass nor fail: JUnit's `skipped`. */
const skippedVerdict = (v: Verdict) => v === 'not_exercised' || v === 'skipped';

/** JUnit XML: one testsuite per scenario (group), one testcase per check; not_exercised and skipped checks are skipped. */
export function formatJunit(report: ConformanceReport): string {
  const count = (s: ScenarioReport, v: Verdict) =>
    s.checks.filter((c) => (v === 'not_exercised' ? skippedVerdict(c.verdict) : c.verdict === v)).length;
  const all = report.scenarios.flatMap((s) => s.checks);
  const out = [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<testsuites name="${xmlEscape(
      `agent-access conformance ${report.kind ?? 'client'}: ${report.command.join(' ')}`,
    )}" tests="${all.length}" failures="${all.filter((c) => c.verdict === 'fail').length}" skipped="${all.filter((c) => skippedVerdict(c.verdict)).length}">`,
  ];
  for (const s of report.scenarios) {
    out.push(
      `  <testsuite name="${xmlEscape(s.name)}" tests="${s.checks.length}" failures="${count(s, 'fail')}` +
        `" skipped="${count(s, 'not_exercised')}" time="${(s.duration_ms / 1000).toFixed(3)}">`,
    );
    for (const c of s.checks) {
      const open = `    <testcase classname="${xmlEscape(s.name)}" name="${xmlEscape(c.id)}">`;
      if (c.verdict === 'pass') out.push(`${open.slice(0, -1)} />`);
      else if (skippedVerdict(c.verdict)) out.push(open, `      <skipped message="${xmlEscape(c.message)}" />`, '    </testcase>');
      else
        out.push(
          open,
          `      <failure message="${xmlEscape(c.message)}" type="${xmlEscape(c.rule)}">${xmlEscape(
            `${c.message}\nrule: ${c.rule}` +
              `${c.hint ? `\nhint: ${c.hint}` : ''}${c.sent ? `\nsent: ${c.sent}` : ''}${c.received ? `\nreceived: ${c.received}` : ''}`,
          )}</failure>`,
          '    </testcase>',
        );
    }
    out.push('  </testsuite>');
  }
  out.push('</testsuites>');
  return `${out.join('\n')}\n`;
}
