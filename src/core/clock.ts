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
}

export const SECOND = 1000;
export const MINUTE = 60 * SECOND;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;

/** Whole seconds, as JWT and OAuth fields carry them. */
export const epochSeconds = (ms: number): number => Math.floor(ms / 1000);
