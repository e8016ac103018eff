import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'test/**/*.test.tsx'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Tests start real servers and child processes; two cores do not profit from more workers.
    maxWorkers: 2,
    // The JSON report lets CI print a plain "N passed, N failed" line.
    reporters: ['default', 'json'],
    outputFile: { json: 'build/test-results.json' },
  },
});
