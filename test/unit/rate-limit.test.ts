/** Rate limits (spec 7, 8) on the manual clock: a fixed window per grant; over the limit is refused with the seconds until the window resets. */
import { describe, expect, it } from 'vitest';
import { ManualClock, MINUTE, SECOND } from '../../src/core/state/clock.js';
import { parseRateLimit, RateLimitedError, RateLimiter } from '../../src/core/state/rate-limit.js';
import { T0 } from './helpers.js';

describe('rate limits', () => {
  it('spec 8: each answer reports limit, remaining and the whole seconds until the window resets', () => {
    const clock = new ManualClock(T0);
    const limiter = new RateLimiter(clock, { limit: 3, windowMs: MINUTE });
    expect(limiter.take('g')).toEqual({ limit: 3, remaining: 2, reset: 60 });
    clock.advance(20 * SECOND + 1);
    expect(limiter.take('g')).toEqual({ limit: 3, remaining: 1, reset: 40 });
    expect(limiter.take('g')).toEqual({ limit: 3, remaining: 0, reset: 40 });
  });

  it('spec 7: over the limit is refused (429) with Retry-After pointing at the end of the window; the next window is fresh', () => {
    const clock = new ManualClock(T0);
    const limiter = new RateLimiter(clock, { limit: 2, windowMs: MINUTE });
    limiter.take('g');
    limiter.take('g');
    clock.advance(45 * SECOND);
    let refused: unknown;
    try {
      limiter.take('g');
    } catch (e) {
      refused = e;
    }
    expect(refused).toBeInstanceOf(RateLimitedError);
    expect((refused as RateLimitedError).state).toEqual({ limit: 2, remaining: 0, reset: 15 });
    clock.advance(15 * SECOND);
    expect(limiter.take('g')).toEqual({ limit: 2, remaining: 1, reset: 60 });
  });

  it('spec 8: windows are per grant; one grant over its limit does not hold back another', () => {
    const clock = new ManualClock(T0);
    const limiter = new RateLimiter(clock, { limit: 1, windowMs: MINUTE });
    limiter.take('a');
    expect(() => limiter.take('a')).toThrow(RateLimitedError);
    expect(limiter.take('b').remaining).toBe(0);
  });

  it('windows stay aligned to their start after an idle stretch, and Reset is never 0 while the window is open', () => {
    const clock = new ManualClock(T0);
    const limiter = new RateLimiter(clock, { limit: 5, windowMs: MINUTE });
    limiter.take('g');
    clock.advance(2 * MINUTE + 30 * SECOND);
    expect(limiter.take('g')).toEqual({ limit: 5, remaining: 4, reset: 30 });
    clock.advance(30 * SECOND - 1);
    expect(limiter.take('g').reset).toBe(1);
  });

  it('a limit is written N/s, N/min or N/h', () => {
    expect(parseRateLimit('60/min')).toEqual({ limit: 60, windowMs: MINUTE });
    expect(parseRateLimit('10/s')).toEqual({ limit: 10, windowMs: SECOND });
    expect(parseRateLimit('1000/h')).toEqual({ limit: 1000, windowMs: 60 * MINUTE });
    for (const bad of ['0/min', 'lots', '10/fortnight']) expect(() => parseRateLimit(bad), bad).toThrow(/N\/s, N\/min or N\/h/);
  });
});
