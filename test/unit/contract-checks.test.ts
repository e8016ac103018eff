/**
 * Issue 43: docs/conformance-server.md held to the checks' own definitions, and the server report's renderings.
 */
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { formatJunit, formatTable, summarizeChecks, type ConformanceReport } from '../../src/conformance/report.js';
import { NEED_FLAG, SERVER_CHECKS } from '../../src/contract/checks.js';

describe('43.2 the checks of conformance server', () => {
  it('docs/conformance-server.md lists every check with its rule and the flag it needs, and nothing else', async () => {
    const doc = await readFile(new URL('../../docs/conformance-server.md', import.meta.url), 'utf8');
    const rows = [...doc.matchAll(/^\| `([a-z-]+\.[a-z0-9-]+)` +\| ([^|]+?) +\| ([^|]*?) *\|/gm)].map((m) => [m[1], m[2], m[3]]);
    expect(rows).toEqual(Object.entries(SERVER_CHECKS).map(([id, c]) => [id, c.rule, 'needs' in c ? `\`${NEED_FLAG[c.needs]}\`` : '']));
  });

  it('43.1 the table shows one line per check, a skipped check its flag, a failed one what was sent and what came back', () => {
    const checks = [
      {
        id: 'guard.no-token',
        rule: 'spec 5.5',
        verdict: 'fail' as const,
        message: 'no WWW-Authenticate',
        sent: 'POST /chat/ask',
        received: '401 {}',
      },
      { id: 'ask.answer', rule: 'spec 2.4', verdict: 'skipped' as const, message: 'skipped (needs --allow-charges)' },
      { id: 'token.response', rule: 'spec 2.2', verdict: 'pass' as const, message: 'ok' },
    ];
    const report: ConformanceReport = {
      version: 1,
      kind: 'server',
      command: ['conformance', 'server'],
      base_url: 'http://127.0.0.1:4100',
      scenarios: [{ name: 'guard', description: 'guard', verdict: 'fail', exit_code: null, duration_ms: 0, checks }],
      summary: summarizeChecks(checks),
      charges: { calls: 0, routes: {}, note: 'No charged call was made: nothing was charged.' },
    };
    const table = formatTable(report);
    expect(table).toMatch(
      /^guard\.no-token +fail +spec 5\.5\n {2}no WWW-Authenticate\n {2}sent: +POST \/chat\/ask\n {2}received: 401 \{\}$/m,
    );
    expect(table).toMatch(/^ask\.answer +skipped +skipped \(needs --allow-charges\)$/m);
    expect(table).toContain('1 passed, 1 failed, 1 skipped (http://127.0.0.1:4100)\nNo charged call was made: nothing was charged.\n');
    const xml = formatJunit(report);
    expect(xml).toContain('agent-access conformance server');
    expect(xml).toContain('tests="3" failures="1" skipped="1"');
    expect(xml).toContain('sent: POST /chat/ask\nreceived: 401 {}');
  });
});
