#!/usr/bin/env node
/* global process, URL -- Node's, for a plain script */
/**
 * `npm start`: builds only when a source is newer than the build, and quietly (the bundler's chunk list is for
 * `npm run build`); the build's output is shown when it fails.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const BUILT = join(root, 'dist', 'bundle', 'main.cjs');
/** What the build reads: the sources and its configuration. */
const INPUTS = ['src', 'package.json', 'package-lock.json', 'tsconfig.json', 'rolldown.config.js'];

function newest(path) {
  const stat = statSync(path, { throwIfNoEntry: false });
  if (!stat) return 0;
  if (!stat.isDirectory()) return stat.mtimeMs;
  let latest = stat.mtimeMs;
  for (const entry of readdirSync(path)) latest = Math.max(latest, newest(join(path, entry)));
  return latest;
}

const built = statSync(BUILT, { throwIfNoEntry: false })?.mtimeMs ?? 0;
const changed = Math.max(...INPUTS.map((input) => newest(join(root, input))));
if (built >= changed) process.exit(0);
process.stderr.write(built === 0 ? 'building agent-access (first start)…\n' : 'building agent-access (sources changed)…\n');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const result = spawnSync(npm, ['run', '--silent', 'build'], { cwd: root, encoding: 'utf8', shell: process.platform === 'win32' });
if (result.status !== 0) {
  process.stderr.write(`${result.stdout ?? ''}${result.stderr ?? ''}`);
  process.stderr.write(`the build failed (exit ${result.status ?? result.signal}); see above\n`);
  process.exit(1);
}
