/**
 * Waiting in tests without guessing how long something takes: until a condition holds (polled, with a deadline),
 * or until an event arrives. A test sleeps only where wall-clock time itself is under test.
 */
import type { AppEvent, EventName } from '../../src/core/state/events.js';
import type { EventBus } from '../../src/core/state/events.js';

/**
 * Resolves with the first truthy value of `probe`, tried now and then every `intervalMs` until `timeoutMs` has
 * passed; then fails naming `what` (and the last value, when `describe` says how to show it).
 */
export async function pollUntil<T>(
  probe: () => T | Promise<T>,
  what: string,
  options: { timeoutMs?: number; intervalMs?: number; describe?: () => string } = {},
): Promise<NonNullable<T>> {
  const { timeoutMs = 10_000, intervalMs = 10 } = options;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() >= deadline)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${options.describe ? `; last seen:\n${options.describe()}` : ''}`,
      );
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** The next event of this name on the core's bus (matching `test`), or a failure naming it after `timeoutMs`. */
export function nextEvent<N extends EventName>(
  events: EventBus,
  name: N,
  test: (event: Extract<AppEvent, { name: N }>) => boolean = () => true,
  timeoutMs = 10_000,
): Promise<Extract<AppEvent, { name: N }>> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      unsubscribe();
      reject(new Error(`no ${name} event within ${timeoutMs} ms`));
    }, timeoutMs);
    const unsubscribe = events.subscribe((event) => {
      if (event.name !== name || !test(event as Extract<AppEvent, { name: N }>)) return;
      clearTimeout(timer);
      unsubscribe();
      resolve(event as Extract<AppEvent, { name: N }>);
    });
  });
}

/** A promise and the function that resolves it: a test holds a request (or a step) until it lets it go. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}
