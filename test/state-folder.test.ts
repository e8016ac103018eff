/**
 * Issue 45.4: the folder serve makes for its state holds the signing key, so it tells git to leave all of it out;
 * a folder the user made is left as it is.
 */
import { spawnSync } from 'node:child_process';
import { mkdir, readFile, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { startServe } from './helpers/cli.js';
import { scratchDir } from './helpers/emulator.js';

describe('45.4 the state folder and git', () => {
  it('45.4 serve makes .agent-access/ with a .gitignore of `*`, so `git status` in the project shows none of it', async () => {
    const project = await scratchDir();
    spawnSync('git', ['init', '-q'], { cwd: project });
    const serve = await startServe([], { cwd: project });
    expect(await serve.stop()).toBe(0);
    const ignore = await readFile(join(project, '.agent-access', '.gitignore'), 'utf8');
    expect(ignore.split('\n')).toContain('*');
    expect((await stat(join(project, '.agent-access', '.gitignore'))).mode & 0o777).toBe(0o600);
    const status = spawnSync('git', ['status', '--porcelain', '--untracked-files=all'], { cwd: project, encoding: 'utf8' });
    expect(status.status).toBe(0);
    expect(status.stdout).toBe('');
  });

  it('45.4 a state folder that exists already gets no .gitignore', async () => {
    const project = await scratchDir();
    await mkdir(join(project, 'state'));
    const serve = await startServe(['--state', 'state/emulator.json'], { cwd: project });
    expect(await serve.stop()).toBe(0);
    expect(await readdir(join(project, 'state'))).not.toContain('.gitignore');
  });
});
