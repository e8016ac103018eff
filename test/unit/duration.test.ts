/**
 * The one duration parser (src/core/state/clock.ts parseDuration) behind the clock, faults, the admin API and serve's
 * duration flags: single units, combined units, milliseconds; junk refused with the accepted forms named.
 */
import { InvalidArgumentError } from 'commander';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseDurationFlag, parseRetentionFlag } from '../../src/cli/flags.js';
import { secondsFlag } from '../../src/cli/seconds.js';
import { DAY, HOUR, MINUTE, SECOND, parseDuration } from '../../src/core/state/clock.js';
import { parseFaultSpec } from '../../src/core/emulation/fault-spec.js';

describe('parseDuration', () => {
  it('reads one number with a unit, as the ms package does', () => {
    expect(parseDuration('16m')).toBe(16 * MINUTE);
    expect(parseDuration('24h')).toBe(24 * HOUR);
    expect(parseDuration('90s')).toBe(90 * SECOND);
    expect(parseDuration('2d')).toBe(2 * DAY);
    expect(parseDuration('1.5h')).toBe(90 * MINUTE);
    expect(parseDuration('500ms')).toBe(500);
    expect(parseDuration('2 days')).toBe(2 * DAY);
    expect(parseDuration('16M')).toBe(16 * MINUTE);
  });

  it('reads units combined, with or without spaces: 23h59m, 1h30m, 2d 4h, 1m30s', () => {
    expect(parseDuration('23h59m')).toBe(23 * HOUR + 59 * MINUTE);
    expect(parseDuration('1h30m')).toBe(90 * MINUTE);
    expect(parseDuration('2d 4h')).toBe(2 * DAY + 4 * HOUR);
    expect(parseDuration('1m30s')).toBe(90 * SECOND);
    expect(parseDuration('1s500ms')).toBe(1_500);
    expect(parseDuration(' 1 h 30 min ')).toBe(90 * MINUTE);
  });

  it('any hours, minutes and seconds written together add up', () => {
    fc.assert(
      fc.property(fc.nat(999), fc.nat(59), fc.nat(59), (h, m, s) => {
        expect(parseDuration(`${h}h${m}m${s}s`)).toBe(h * HOUR + m * MINUTE + s * SECOND);
      }),
    );
  });

  it('reads digits and numbers as milliseconds', () => {
    expect(parseDuration('900000')).toBe(900_000);
    expect(parseDuration(0)).toBe(0);
    expect(parseDuration(1_000)).toBe(1_000);
    expect(Object.is(parseDuration(-0), 0)).toBe(true);
  });

  it('refuses junk and says which forms it takes', () => {
    for (const junk of ['later', '', 'h', '1h30', '1.5', '-1h', '1h-30m', '1x', '1e3', '10 m x', 'NaN']) {
      expect(() => parseDuration(junk), junk).toThrow(RangeError);
      expect(() => parseDuration(junk), junk).toThrow(`"${junk}" is not a duration; write a number with a unit`);
      expect(() => parseDuration(junk), junk).toThrow(/1h30m, 23h59m/);
    }
    for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY]) expect(() => parseDuration(bad), String(bad)).toThrow(RangeError);
  });

  it('refuses more than its limit, and says the limit', () => {
    expect(parseDuration('36500d')).toBe(36_500 * DAY);
    expect(() => parseDuration('200y')).toThrow('"200y" is longer than 100 years');
    expect(() => parseDuration('2h', { max: HOUR, text: 'an hour' })).toThrow('"2h" is longer than an hour');
  });
});

describe('every duration goes through it', () => {
  it("serve's duration flags: --ask-timeout, --ask-latency, --research-duration, --training-step", () => {
    expect(parseDurationFlag('250')).toBe(250);
    expect(parseDurationFlag('1m30s')).toBe(90 * SECOND);
    expect(() => parseDurationFlag('soon')).toThrow(InvalidArgumentError);
    expect(() => parseDurationFlag('soon')).toThrow(/not a duration/);
    // A real-time wait is a timer: at most 2^31-1 ms.
    expect(() => parseDurationFlag('30d')).toThrow(/longer than 24 days/);
  });

  it('--retention kind=DURATION takes combined units and refuses 0', () => {
    expect(parseRetentionFlag('jobs=1d12h')).toEqual({ researchJobs: DAY + 12 * HOUR });
    expect(() => parseRetentionFlag('jobs=0s')).toThrow(/longer than 0/);
    expect(() => parseRetentionFlag('jobs=1h30')).toThrow(/jobs: "1h30" is not a duration/);
  });

  it("a fault's `in` takes combined units", () => {
    const now = Date.UTC(2026, 0, 1);
    const spec = parseFaultSpec({ kind: 'revoke', grant_id: 'grant_x', in: '23h59m' }, now);
    expect(spec).toMatchObject({ at: now + 23 * HOUR + 59 * MINUTE });
  });

  it('--timeout, --interval and --min-ttl take durations; a bare number stays seconds, as they always took', () => {
    const timeout = secondsFlag({ min: 1 });
    expect(timeout('300')).toBe(300);
    expect(timeout('5m')).toBe(300);
    expect(timeout('1h30m')).toBe(5_400);
    expect(timeout('2.5')).toBe(2.5);
    expect(() => timeout('soon')).toThrow(InvalidArgumentError);
    expect(() => timeout('soon')).toThrow(/a number of seconds/);
    expect(() => timeout('0')).toThrow(/not between 1 and/);
    expect(() => timeout('30d')).toThrow(/not between 1 and 2147483 seconds/);
  });
});
