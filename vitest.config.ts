import { relative } from 'node:path';
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Tests that drive programs outside Node: Chromium (the consent and login pages), tmux (the dashboard in a real
 * terminal), npm (the packed tarball) and the MCP conformance suite. Everything else outside test/unit starts servers, processes or files.
 */
const E2E = [
  'test/consent-browser.test.ts',
  'test/consent-policy.test.ts',
  'test/login-browser.test.ts',
  'test/settings-browser.test.ts',
  'test/dashboard-tmux.test.ts',
  'test/pack.test.ts',
  // The official MCP conformance suite, on the Node 22 .ci/run installs.
  'test/mcp-conformance-suite.test.ts',
];

/**
 * Integration files that replace a module for their tests (a vi.mock of node:fs or node:fs/promises, to inject faults): each needs a module
 * graph of its own, which the rest of the integration project shares (test/unit/unit-project.test.ts checks the list).
 */
export const OWN_MODULES = ['test/writer-faults.test.ts', 'test/writer-crash-points.test.ts'];

/**
 * The files that take longest, most of it waiting (Retry-After, polls, lock staleness, processes), longest first.
 * Vitest starts the files an earlier run measured longest first; with no earlier run (a fresh clone, as CI's) it
 * starts the largest first, and the defect proofs, small files that each grade whole suites, ran alone at the end.
 */
const LONGEST = [
  'test/mcp-conformance-suite.test.ts',
  'test/pack.test.ts',
  'test/conformance-client.test.ts',
  'test/conformance-proofs-authorization.test.ts',
  'test/conformance-proofs-calls.test.ts',
  'test/cli.test.ts',
  'test/readme-commands.test.ts',
  'test/conformance-server.test.ts',
  'test/faulty-client.test.ts',
  'test/conformance-proofs.test.ts',
];

/** Vitest's order, with LONGEST's files first within their project (projects run in vitest's order). */
class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (f: TestSpecification) => {
      const i = LONGEST.indexOf(relative(this.ctx.config.root, f.moduleId));
      return i === -1 ? LONGEST.length : i;
    };
    const projects = [...new Set(sorted.map((f) => f.project.name))];
    return projects.flatMap((name) => sorted.filter((f) => f.project.name === name).sort((a, b) => rank(a) - rank(b)));
  }
}

export default defineConfig({
  test: {
    // The compile cache of the command lines the tests start goes to a folder of the run's (test/helpers/cache-home.ts).
    globalSetup: ['test/helpers/cache-home.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // One more worker than the two cores: many integration files mostly wait (Retry-After, lock staleness, request
    // timeouts, polls a second apart), and with two workers both often waited at once (docs/development.md, Test time).
    maxWorkers: 3,
    sequence: { sequencer: LongestFirst },
    // The JSON report lets CI print a plain "N passed, N failed" line; it counts the tests of every project.
    reporters: ['default', 'json'],
    outputFile: { json: 'build/test-results.json' },
    // `vitest run` runs them all; `vitest run --project unit` (npm run test:unit) one, `--project 'integration*'` both integration ones.
    projects: [
      {
        extends: true,
        // Everything that runs in this process: the core's rules on a manual clock, the HTTP rules against an emulator
        // that binds nothing (helpers/in-process.ts), the dashboard's views rendered by ink-testing-library, pure
        // functions. No sockets, no child processes; most tests take milliseconds.
        // The test timeout is the one above: a net for a test that hangs, not a measure of speed (npm run bench has the
        // targets). The first request that searches builds the search index of the fixtures, about a quarter of a second of
        // CPU and several seconds on a busy machine; later emulators on the same fixtures share it (core/resources/search.ts).
        // Not isolated: each file imported fastify, the MCP SDK and the whole core anew, and that import was about two
        // thirds of the project's time. Nothing here mocks a module or changes the environment, so sharing the
        // modules changes nothing a test sees; a test that counts what a module did counts from its own start.
        test: { name: 'unit', include: ['test/unit/**/*.test.ts'], isolate: false },
      },
      {
        extends: true,
        // Real sockets, spawned `agent-access` processes, state files in temp dirs. The files share their modules, as
        // the unit files do: what a test starts, it stops when it ends (onTestFinished), and a file that fakes timers
        // gives the real ones back.
        test: {
          name: 'integration',
          include: ['test/**/*.test.ts', 'test/**/*.test.tsx'],
          exclude: ['test/unit/**', ...E2E, ...OWN_MODULES],
          isolate: false,
        },
      },
      {
        extends: true,
        test: { name: 'integration-isolated', include: OWN_MODULES },
      },
      {
        extends: true,
        test: { name: 'e2e', include: E2E },
      },
    ],
  },
});
