/**
 * The unit project shares its modules between files (vitest.config.ts, `isolate: false`). That holds only while no
 * unit test replaces a module or changes the process's environment for the files that run after it: such a test
 * belongs to the integration project, which isolates each file.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const UNIT = fileURLToPath(new URL('.', import.meta.url));
/** What would leak into the next file: a mocked module, a stubbed global or variable, a changed environment or clock. */
const LEAKS = /\bvi\.(?:mock|doMock|stubGlobal|stubEnv|useFakeTimers)\(|process\.env(?:\.\w+|\[[^\]]+\])\s*=(?!=)|delete process\.env/;

describe('the unit project shares its modules between files', () => {
  it('no unit test mocks a module, stubs a global, fakes timers or changes the environment', async () => {
    const files = (await readdir(UNIT)).filter((name) => name.endsWith('.ts') && name !== 'unit-project.test.ts');
    expect(files.length).toBeGreaterThan(40);
    const leaking: string[] = [];
    for (const name of files) {
      const lines = (await readFile(join(UNIT, name), 'utf8')).split('\n');
      lines.forEach((line, i) => {
        if (LEAKS.test(line)) leaking.push(`test/unit/${name}:${i + 1}: ${line.trim()}`);
      });
    }
    expect(leaking).toEqual([]);
  });
});
