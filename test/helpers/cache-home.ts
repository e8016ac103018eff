import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * vitest's global setup: the command lines the tests start keep Node's compile cache (bin/agent-access.js) in a
 * folder of this run's, not in the user's ~/.cache, and it goes with the run. Set before the workers start, so every
 * process they spawn inherits it.
 */
export default async function setup(): Promise<() => Promise<void>> {
  const home = await mkdtemp(join(tmpdir(), 'aa-test-cache-'));
  process.env.XDG_CACHE_HOME = home;
  delete process.env.NODE_COMPILE_CACHE;
  return () => rm(home, { recursive: true, force: true });
}
