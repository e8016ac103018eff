/**
 * Issue 45.9: a clone that was never built says so in one line, and `npm start` builds only when a source changed,
 * quietly. Both run on copies of the scripts in a temp folder, so the real build is neither needed nor touched.
 */
import { spawnSync } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

const repo = (path: string) => fileURLToPath(new URL(`../${path}`, import.meta.url));
let root: string;
afterEach(async () => rm(root, { recursive: true, force: true }));

describe('45.9 a first start without surprises', () => {
  it('45.9 bin/agent-access.js without dist/ prints one line naming `npm run build`, no stack trace, exit 1', async () => {
    root = await mkdtemp(join(tmpdir(), 'unbuilt-'));
    await mkdir(join(root, 'bin'));
    for (const file of ['bin/agent-access.js', 'bin/package.json']) await copyFile(repo(file), join(root, file));
    const run = spawnSync(process.execPath, [join(root, 'bin/agent-access.js'), 'serve'], { encoding: 'utf8' });
    expect(run.status).toBe(1);
    expect(run.stderr).toBe('agent-access: not built yet: run `npm run build` (or `npm start`, which builds first)\n');
    expect(run.stdout).toBe('');
  });

  it('45.9 npm start builds only when a source is newer than the build, without the build output; a failed build shows it', async () => {
    root = await mkdtemp(join(tmpdir(), 'start-'));
    await mkdir(join(root, 'scripts'));
    await mkdir(join(root, 'src'));
    await copyFile(repo('scripts/build-if-stale.mjs'), join(root, 'scripts/build-if-stale.mjs'));
    // A build that leaves the bundle and a mark of each time it ran, and talks as a bundler does.
    const build = `node -e "const fs=require('fs');fs.mkdirSync('dist/bundle',{recursive:true});fs.writeFileSync('dist/bundle/main.cjs','');fs.appendFileSync('builds','x');console.log('chunk list '.repeat(50))"`;
    const writePackage = (script: string) =>
      writeFile(join(root, 'package.json'), JSON.stringify({ name: 'x', scripts: { build: script } }));
    await writePackage(build);
    await writeFile(join(root, 'src/main.ts'), 'export {};\n');
    const start = () => spawnSync(process.execPath, [join(root, 'scripts/build-if-stale.mjs')], { encoding: 'utf8' });
    const builds = async () => (await readFile(join(root, 'builds'), 'utf8').catch(() => '')).length;

    const first = start();
    expect([first.status, first.stderr, first.stdout]).toEqual([0, 'building agent-access (first start)…\n', '']);
    expect(await builds()).toBe(1);

    const unchanged = start();
    expect([unchanged.status, unchanged.stderr, unchanged.stdout]).toEqual([0, '', '']);
    expect(await builds()).toBe(1);

    const later = new Date(Date.now() + 5_000);
    await utimes(join(root, 'src/main.ts'), later, later);
    const changed = start();
    expect([changed.status, changed.stderr]).toEqual([0, 'building agent-access (sources changed)…\n']);
    expect(await builds()).toBe(2);

    await writePackage(`node -e "console.error('src/main.ts(1,1): error TS1005'); process.exit(2)"`);
    const failed = start();
    expect(failed.status).toBe(1);
    expect(failed.stderr).toMatch(/sources changed\)…\n[^]*error TS1005[^]*the build failed \(exit 2\); see above\n$/);
  });
});
