import { execFile } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { HELD_SEMI_SPACE_BYTES } from '../src/cli/heap-settings.js';

/**
 * The CLI's heap settings (src/cli/heap-settings.ts), on the build in a process of its own: V8's flags are the whole
 * process's, and this one's are the test runner's.
 */

const SERVE_HEAP = pathToFileURL(fileURLToPath(new URL('../dist/cli/heap-settings.js', import.meta.url))).href;
/** The young generation's size when held: both semi-spaces. */
const HELD = 2 * HELD_SEMI_SPACE_BYTES;

// Holds the young generation as the CLI does (unless told not to) and allocates as a server under load, a turn at a
// time (most objects die young, a third live a while), before and after it starts a worker thread as serve's state
// writer does. Prints the size the young generation keeps (both semi-spaces): the median over the last turns, since
// Node 24's V8 lets it grow for a few turns while a major collection marks, whatever its semi-spaces' size (it does
// so with --max-semi-space-size too), and back once that collection ends.
const SCRIPT = `
import { getHeapSpaceStatistics } from 'node:v8';
import { Worker } from 'node:worker_threads';
const [tune, module] = process.argv.slice(1);
if (tune === 'tune') (await import(module)).holdYoungGeneration();
const young = () => getHeapSpaceStatistics().find((space) => space.space_name === 'new_space').space_size;
const held = [];
const load = async (turns) => {
  const sizes = [];
  for (let turn = 0; turn < turns; turn++) {
    for (let i = 0; i < 1e4; i++) {
      const o = { a: i, b: [i], c: 'x' + i };
      if (i % 3 === 0) held.push(o);
      if (held.length > 2e5) held.length = 0;
    }
    sizes.push(young());
    await new Promise((resolve) => setImmediate(resolve));
  }
  return sizes.sort((a, b) => a - b)[turns >> 1];
};
await load(600);
// Started once the young generation is as large as it is let grow: V8 sets the growth factor back as the thread starts.
const worker = new Worker('setInterval(() => {}, 1000)', { eval: true });
await new Promise((resolve) => worker.once('online', resolve));
process.stdout.write(JSON.stringify({ young: await load(150) }));
await worker.terminate();
`;

async function youngGeneration(tune: boolean, execArgv: string[] = [], nodeOptions = ''): Promise<number> {
  const { stdout, stderr } = await promisify(execFile)(
    process.execPath,
    [...execArgv, '--input-type=module', '-e', SCRIPT, tune ? 'tune' : 'plain', SERVE_HEAP],
    { env: { ...process.env, NODE_OPTIONS: nodeOptions } },
  );
  // A V8 that no longer knows the flag says so on stderr, at every collection.
  expect(stderr).toBe('');
  return (JSON.parse(stdout) as { young: number }).young;
}

describe('the CLI keeps its young generation small', () => {
  // V8 sizes its largest semi-space by the machine's memory: given here, so that the baseline grows on any machine.
  it('Node left to grow it grows it past the size held under this allocation (so the checks below can fail)', async () => {
    expect(await youngGeneration(false, ['--max-semi-space-size=16'])).toBeGreaterThan(HELD);
  });

  it('held, it grows to the size held and no further, with a worker thread started mid-load', async () => {
    expect(await youngGeneration(true)).toBeLessThanOrEqual(HELD);
  });

  it("a user's semi-space flag on node's command line wins", async () => {
    expect(await youngGeneration(true, ['--max-semi-space-size=16'])).toBeGreaterThan(HELD);
  });

  it("a user's semi-space flag in NODE_OPTIONS wins, also quoted", async () => {
    expect(await youngGeneration(true, [], '"--max-semi-space-size=16"')).toBeGreaterThan(HELD);
  });

  it("a worker thread's error still reaches the process (the hold listens for the thread's start, not its errors)", async () => {
    const script = `(await import(process.argv[1])).holdYoungGeneration();
new (await import('node:worker_threads')).Worker('throw new Error("writer failed")', { eval: true });
setTimeout(() => {}, 2000);`;
    const run = promisify(execFile)(process.execPath, ['--input-type=module', '-e', script, SERVE_HEAP], {
      env: { ...process.env, NODE_OPTIONS: '' },
    });
    await expect(run).rejects.toMatchObject({ code: 1, stderr: expect.stringContaining('writer failed') });
  });
});
