/**
 * The unit and integration files share their modules between files (vitest.config.ts, `isolate: false`). That holds
 * only while no test replaces a module or changes the process's environment for the files that run after it: such a
 * file goes into the `integration-isolated` project (OWN_MODULES), which gives each file a module graph of its own.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { OWN_MODULES } from '../../vitest.config.js';

const TEST = fileURLToPath(new URL('..', import.meta.url));
/** What would leak into the next file: a mocked module, a stubbed global or variable, a changed environment. */
const LEAKS = new RegExp(
  [
    String.raw`\bvi\.(?:mock|doMock|stubGlobal|stubEnv)\(`,
    String.raw`process\.env(?:\.\w+|\[[^\]]+\])\s*(?:\?\?|\|\||&&)?=(?!=)`,
    String.raw`delete process\.env|Object\.assign\(process\.env|process\.chdir\(`,
  ].join('|'),
);

/** Each line of the shared files' tests that would leak, as `file:line: text`. */
async function leaks(files: string[], fakeTimersToo: boolean): Promise<string[]> {
  const found: string[] = [];
  for (const file of files) {
    const text = await readFile(join(TEST, file), 'utf8');
    // Fake timers are given back by the file that takes them, or the next file runs on them.
    const keepsFakeTimers = /\bvi\.useFakeTimers\(/.test(text) && (fakeTimersToo || !/\bvi\.useRealTimers\(/.test(text));
    if (keepsFakeTimers) found.push(`test/${file}: vi.useFakeTimers`);
    text.split('\n').forEach((line, i) => {
      if (LEAKS.test(line)) found.push(`test/${file}:${i + 1}: ${line.trim()}`);
    });
  }
  return found;
}

describe('the unit and integration files share their modules', () => {
  it('no unit file mocks a module, stubs a global, fakes timers or changes the environment', async () => {
    const files = (await readdir(join(TEST, 'unit'))).filter((name) => name.endsWith('.ts') && name !== 'unit-project.test.ts');
    expect(files.length).toBeGreaterThan(40);
    expect(
      await leaks(
        files.map((name) => `unit/${name}`),
        true,
      ),
    ).toEqual([]);
  });

  it('an integration file that mocks a module is in the integration-isolated project; the others give fake timers back', async () => {
    const own = new Set(OWN_MODULES.map((path) => path.replace(/^test\//, '')));
    const files = (await readdir(TEST)).filter((name) => /\.test\.tsx?$/.test(name) && !own.has(name));
    expect(files.length).toBeGreaterThan(40);
    expect(await leaks(files, false)).toEqual([]);
    for (const file of own) expect(await readFile(join(TEST, file), 'utf8')).toMatch(/\bvi\.mock\(/);
  });
});
