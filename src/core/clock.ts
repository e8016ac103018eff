import ms, { type StringValue } from 'ms';
/** Milliseconds since the epoch. The core reads time only through a Clock, never Date.now(). */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** A clock that moves only when told to: tests and `--clock manual` drive expiry with it. */
export class ManualClock implements Clock {
  #now: number;
  constructor(start: number = Date.now()) {
    this.#now = start;
  }
  now(): number {
    return this.#now;
  }
  advance(ms: number): number {
    if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`cannot advance the clock by ${ms} ms`);
    this.#now += ms;
    return this.#now;
  }
  /** Puts the clock at `now`, back or forward: a snapshot restore brings back the time it was saved at. */
  set(now: number): number {
    if (!Number.isFinite(now)) throw new RangeError(`cannot set the clock to ${now}`);
    this.#now = now;
    return this.#now;
  }
}

export const SECOND = 1000;
export const MINUTE = 60 * SECOND;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;
/** The longest single move of a manual clock: far enough for any test, short of dates JavaScript cannot show. */
export const MAX_ADVANCE = 100 * 365 * DAY;

/** Whole seconds, as JWT and OAuth fields carry them. */
export const epochSeconds = (ms: number): number => Math.floor(ms / 1000);

/**
 * A duration as people and test code write it: milliseconds as a number, or `"16m"`, `"24h"`, `"900s"`,
 * `"1.5h"`, `"500ms"` (the `ms` package's units). Throws a RangeError that names the value otherwise.
 */
export function parseDuration(value: string | number): number {
  const text = String(value).trim();
  let n: number | undefined;
  try {
    n = typeof value === 'number' ? value : /^\d+$/.test(text) ? Number(text) : ms(text as StringValue);
  } catch {
    n = undefined; // ms throws on an empty string
  }
  if (typeof n !== 'number' || !Number.isFinite(n) || n < 0 || n > MAX_ADVANCE) {
    throw new RangeError(`"${value}" is not a duration of up to 100 years; write e.g. 16m, 24h, 900s, 500ms or a number of milliseconds`);
  }
  return n + 0; // -0 → 0
}
