import { PerformanceObserver } from 'node:perf_hooks';
import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';

/**
 * How far V8 lets the old generation grow past what a full collection left live before the next one, in percent
 * (docs/storage.md "Memory"). Left to itself V8 picks up to 300 %; the state is all on the heap, so at 100k records
 * that let a server under load grow from about 210 MB to 360 MB before collecting.
 */
export const SERVE_HEAP_GROWING_PERCENT = 30;

/**
 * The same while `serve` starts: reading a large state is a heap that only grows, and at 30 % a 100k-record start
 * marked it about twice as often and took an eighth longer (810 against 720 ms). SERVE_HEAP_GROWING_PERCENT, set
 * once started, holds from the next full collection on; V8's own factor (up to 300 %) at the start's last one put that
 * one so far off that the 100k server under load grew to 364 MB first, where 100 % keeps its peak where 30 % did.
 */
export const SERVE_START_HEAP_GROWING_PERCENT = 100;

/** V8 flags that size the young generation; a user who gives one keeps V8's own growth. */
export const SEMI_SPACE_FLAG = /^--(?:(?:max|min)[-_]semi[-_]space[-_]size|semi[-_]space[-_]growth[-_]factor)\b/;
const HEAP_GROWING_FLAG = /^--heap[-_]growing[-_]percent\b/;

/** Whether the user gave this V8 flag: on node's command line or in NODE_OPTIONS (where Node also takes it quoted). */
export function userGave(flag: RegExp, execArgv: readonly string[], nodeOptions: string): boolean {
  return [...execArgv, ...nodeOptions.split(/\s+/).map((arg) => arg.replace(/^["']/, ''))].some((arg) => flag.test(arg));
}

/**
 * The semi-space size the CLI lets V8's young generation grow to, in bytes: V8 starts at 1 MB and, under load, grows
 * to 16 MB on a machine of 8 GB or more (Node 24: 64 MB).
 */
export const HELD_SEMI_SPACE_BYTES = 4 * 2 ** 20;

/**
 * Holds the young generation to semi-spaces of HELD_SEMI_SPACE_BYTES, for every command of the CLI, whose processes
 * are its own (docs/storage.md "Memory"): a request's garbage dies within such a semi-space as well, and the 16 MB ones
 * were about 30 MB of RSS for as long as `serve` ran. Called before any command's modules load, since loading
 * `serve`'s alone grows it fourfold; never by `startEmulator` in the caller's process (the test runner's). A
 * semi-space flag of the user's wins.
 *
 * V8 reads its growth factor each time it would grow the young generation, after a collection: the factor is 2 while
 * the young generation is below the size held, 1 once it is there, decided again after each collection. V8 sets
 * the factor back to at least 2 whenever an isolate is made, so it is decided again on each turn from a worker
 * thread's start (the state writer's, while a start reads the state) until the thread is up. Best effort: a
 * collection is seen between turns of the event loop only, so a long synchronous stretch of allocation can grow it
 * a step further.
 */
export function holdYoungGeneration(execArgv: readonly string[] = process.execArgv, nodeOptions = process.env.NODE_OPTIONS ?? ''): void {
  if (userGave(SEMI_SPACE_FLAG, execArgv, nodeOptions)) return;
  const decide = () => {
    // The new space's size counts both of its semi-spaces.
    const young = getHeapSpaceStatistics().find((space) => space.space_name === 'new_space');
    // A V8 without that space has another young generation: left as it is.
    if (young) setFlag(GROWTH_FACTOR, young.space_size < 2 * HELD_SEMI_SPACE_BYTES ? 2 : 1);
  };
  decide();
  new PerformanceObserver(decide).observe({ entryTypes: ['gc'] });
  process.on('worker', (worker) => {
    let starting = true;
    const again = () => {
      decide();
      if (starting) setTimeout(again, 1).unref();
    };
    const started = () => {
      starting = false;
      decide();
    };
    // Not 'error': a listener would take a worker's error from whoever else must see it; 'exit' follows it.
    worker.once('online', started).once('exit', started);
    again();
  });
}

/**
 * Lets the old generation grow by SERVE_START_HEAP_GROWING_PERCENT between full collections while `serve` starts and
 * by SERVE_HEAP_GROWING_PERCENT once it has (docs/storage.md "Memory"); never in `startEmulator`.
 * `node --heap-growing-percent=N` of the user's own wins.
 */
export function tuneServeHeap(phase: 'starting' | 'started', execArgv: readonly string[] = process.execArgv): void {
  // Node refuses this flag in NODE_OPTIONS: the command line is the only place a user's own can be.
  if (!userGave(HEAP_GROWING_FLAG, execArgv, ''))
    setFlag(HEAP_GROWING_PERCENT, phase === 'starting' ? SERVE_START_HEAP_GROWING_PERCENT : SERVE_HEAP_GROWING_PERCENT);
}

/** A V8 flag this module sets, with V8's own value for it. */
interface V8Flag {
  name: string;
  v8Default: number;
}
const GROWTH_FACTOR: V8Flag = { name: '--semi-space-growth-factor', v8Default: 2 };
const HEAP_GROWING_PERCENT: V8Flag = { name: '--heap-growing-percent', v8Default: 0 };
/** What this module set each flag to. */
const setTo = new Map<V8Flag, number>();

function setFlag(flag: V8Flag, value: number): void {
  setFlagsFromString(`${flag.name}=${value}`);
  setTo.set(flag, value);
}

/**
 * Runs `fn` with the flags this module set back at V8's own values, then sets them again. V8 takes a code cache
 * (compile-cache.ts) only in a process whose flags, those not at V8's values, are the ones of the process that made
 * it; compiled and made this way, a cache holds whatever this module has set meanwhile.
 */
export function atV8FlagDefaults<T>(fn: () => T): T {
  const changed = [...setTo].filter(([flag, value]) => value !== flag.v8Default);
  for (const [flag] of changed) setFlagsFromString(`${flag.name}=${flag.v8Default}`);
  try {
    return fn();
  } finally {
    for (const [flag, value] of changed) setFlagsFromString(`${flag.name}=${value}`);
  }
}
