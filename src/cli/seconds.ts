import { InvalidArgumentError } from 'commander';
import { parseDuration } from '../core/state/clock.js';

/**
 * A flag that takes a duration and stands for seconds (`--timeout`, `--interval`, `--min-ttl`): a duration with its
 * unit (`5m`, `90s`, `1h30m`), or a bare number of seconds, as these flags always took. Answers seconds.
 */
export const secondsFlag =
  ({ min, max = Math.floor((2 ** 31 - 1) / 1_000) }: { min: number; max?: number }) =>
  (value: string): number => {
    const bare = /^\d+(\.\d+)?$/.test(value.trim());
    let seconds: number;
    try {
      seconds = bare ? Number(value) : parseDuration(value) / 1_000;
    } catch (e) {
      throw new InvalidArgumentError((e as Error).message.replace('a whole number of milliseconds', 'a number of seconds'));
    }
    if (seconds < min || seconds > max)
      throw new InvalidArgumentError(`${value} is not between ${min} and ${max} seconds (write e.g. 90s, 5m, 1h30m, or seconds)`);
    return seconds;
  };
