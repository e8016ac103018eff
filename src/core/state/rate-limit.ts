import type { Clock } from './clock.js';
import { AgentAccessError } from './errors.js';

export interface RateLimitConfig {
  limit: number;
  windowMs: number;
}

export interface RateLimitState {
  limit: number;
  remaining: number;
  /** Whole seconds until the window resets (RateLimit-Reset, Retry-After). */
  reset: number;
}

/** Spec 7, 8: over the limit → 429 with Retry-After. */
export class RateLimitedError extends AgentAccessError {
  declare readonly code: 'rate_limit_exceeded';
  constructor(readonly state: RateLimitState) {
    super('rate_limit_exceeded', `rate limit of ${state.limit} requests exceeded; retry in ${state.reset} s`, {
      hint: 'Wait the seconds Retry-After names before the next request with this grant; RateLimit-Remaining on every answer tells how many are left.',
    });
  }
}

const UNITS: Record<string, number> = {
  s: 1000,
  sec: 1000,
  second: 1000,
  m: 60_000,
  min: 60_000,
  minute: 60_000,
  h: 3_600_000,
  hour: 3_600_000,
};

/** Parses `60/min`, `10/s`, `1000/h`. */
export function parseRateLimit(text: string): RateLimitConfig {
  const match = /^\s*(\d+)\s*\/\s*(\d*)\s*([a-z]+)\s*$/i.exec(text);
  const unit = match ? UNITS[match[3]!.toLowerCase()] : undefined;
  if (!match || !unit || Number(match[1]) < 1) throw new Error(`rate limit "${text}" is not of the form N/s, N/min or N/h`);
  return { limit: Number(match[1]), windowMs: unit * (match[2] ? Number(match[2]) : 1) };
}

/** Windows kept before the ended ones are swept. */
const WINDOWS_KEPT = 10_000;

/**
 * A fixed window per grant on the emulator's clock (not persisted: a restart starts fresh windows).
 * Every allowlist response reports the grant's window; a request over the limit is refused before any work.
 */
export class RateLimiter {
  readonly #windows = new Map<string, { start: number; used: number }>();
  constructor(
    private readonly clock: Clock,
    readonly config: RateLimitConfig,
  ) {}

  /** Forgets every window (a snapshot restore: the clock may have gone back). */
  clear(): void {
    this.#windows.clear();
  }

  take(grantId: string): RateLimitState {
    const window = this.#current(grantId);
    const reset = this.#reset(window);
    if (window.used >= this.config.limit) throw new RateLimitedError({ limit: this.config.limit, remaining: 0, reset });
    window.used++;
    return { limit: this.config.limit, remaining: this.config.limit - window.used, reset };
  }

  /** The grant's window as a request that does not count would report it (spec 8: the headers are on responses). */
  peek(grantId: string): RateLimitState {
    const window = this.#current(grantId);
    return { limit: this.config.limit, remaining: Math.max(0, this.config.limit - window.used), reset: this.#reset(window) };
  }

  #current(grantId: string): { start: number; used: number } {
    const now = this.clock.now();
    let window = this.#windows.get(grantId);
    if (!window || now >= window.start + this.config.windowMs) {
      // Keys are grants, or the source addresses of registrations: windows that ended are dropped before they pile up.
      if (!window && this.#windows.size >= WINDOWS_KEPT)
        for (const [key, w] of this.#windows) if (now >= w.start + this.config.windowMs) this.#windows.delete(key);
      window = { start: now - ((now - (window?.start ?? now)) % this.config.windowMs), used: 0 };
      this.#windows.set(grantId, window);
    }
    return window;
  }

  #reset(window: { start: number }): number {
    return Math.max(1, Math.ceil((window.start + this.config.windowMs - this.clock.now()) / 1000));
  }
}
