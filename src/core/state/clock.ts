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

/** What every duration in the emulator accepts, for the refusal of one that is not. */
export const DURATION_FORMS =
  'a number with a unit (ms, s, m, h, d, w; e.g. 500ms, 90s, 16m, 1.5h, 2d), units combined (1h30m, 23h59m, 2d 4h), or a whole number of milliseconds';

/** The longest duration a caller takes, and how to say it. */
export interface DurationLimit {
  max: number;
  text: string;
}

/** One number and its unit, as the `ms` package reads it (`90s`, `1.5h`, `30 min`). */
const DURATION_PART = /(\d+(?:\.\d+)?|\.\d+)\s*([a-z]+)\s*/giy;

/**
 * A duration as people and test code write it, the one parser behind every duration the emulator takes (the
 * clock, faults, serve's flags, the admin API): milliseconds as a number or as digits, one number with a unit
 * (`"16m"`, `"24h"`, `"900s"`, `"1.5h"`, `"500ms"`, `"2d"`: the `ms` package's units), or several added up
 * (`"1h30m"`, `"23h59m"`, `"2d 4h"`), rounded to whole milliseconds. At most `limit` (default 100 years). Throws a
 * RangeError that names the value and the accepted forms otherwise.
 */
export function parseDuration(value: string | number, limit: DurationLimit = { max: MAX_ADVANCE, text: '100 years' }): number {
  const n = typeof value === 'number' ? value : durationOfText(String(value).trim());
  if (n === null || !Number.isFinite(n) || n < 0) throw new RangeError(`"${value}" is not a duration; write ${DURATION_FORMS}`);
  if (n > limit.max) throw new RangeError(`"${value}" is longer than ${limit.text}, the most this takes`);
  return n + 0; // -0 → 0
}

/** The milliseconds a text names, or null when it is not a duration. */
function durationOfText(text: string): number | null {
  if (/^\d+$/.test(text)) return Number(text);
  let total = 0;
  let end = 0;
  DURATION_PART.lastIndex = 0;
  for (let m = DURATION_PART.exec(text); m; m = DURATION_PART.exec(text)) {
    const part = ms(`${m[1]}${m[2]}` as StringValue) as number | undefined;
    if (part === undefined || !Number.isFinite(part)) return null; // an unknown unit
    total += part;
    end = DURATION_PART.lastIndex;
  }
  return end > 0 && end === text.length ? Math.round(total) : null;
}
