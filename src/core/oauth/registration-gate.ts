import { MINUTE, type Clock } from '../state/clock.js';
import { OAuthError } from '../state/errors.js';
import { RateLimitedError, RateLimiter, type RateLimitConfig } from '../state/rate-limit.js';
import type { Repository } from '../state/repository.js';
import { dropUnusedClients, nextUnusedClientExpiry, type Retention } from './retention.js';

/**
 * Open registration (spec 4.1, RFC 7591) answers anyone who reaches `{base_url}`, a page in the developer's browser
 * included, so it is bounded as real authorization servers bound it: a rate per source address and a number of
 * clients; clients never used go after `Retention.unusedClients`. The defaults leave room for a CI suite's thousands.
 */
export interface RegistrationLimits {
  /** Registered clients at most; a registration beyond answers 503 until one goes. */
  maxClients: number;
  /** Registrations per source address on the emulator clock; beyond answers 429. */
  rate: RateLimitConfig;
}

export const DEFAULT_REGISTRATION_LIMITS: RegistrationLimits = { maxClients: 5_000, rate: { limit: 600, windowMs: MINUTE } };

/** What registration admits: the rate of each source, and room in the client table. */
export class RegistrationGate {
  readonly limits: RegistrationLimits;
  readonly #rate: RateLimiter;
  /** Every client's id, kept current by the repository: the count without counting. */
  readonly #clients: ReadonlySet<string>;

  constructor(
    clock: Clock,
    private readonly repo: Repository,
    private readonly retention: Retention,
    limits: Partial<RegistrationLimits> = {},
  ) {
    this.limits = { ...DEFAULT_REGISTRATION_LIMITS, ...limits };
    if (!Number.isSafeInteger(this.limits.maxClients) || this.limits.maxClients < 1)
      throw new Error(`maxClients ${this.limits.maxClients} is not a whole number of at least 1`);
    this.#rate = new RateLimiter(clock, this.limits.rate);
    this.#clients = repo.where('clients', () => true);
  }

  get clientCount(): number {
    return this.#clients.size;
  }

  /** Forgets the windows (a snapshot restore: the clock may have gone back). */
  clear(): void {
    this.#rate.clear();
  }

  /** Counts a registration of `source` (its address); throws 429 `temporarily_unavailable` over the rate. */
  admit(source: string): void {
    try {
      this.#rate.take(source);
    } catch (e) {
      if (!(e instanceof RateLimitedError)) throw e;
      throw new OAuthError(
        'temporarily_unavailable',
        `more than ${this.limits.rate.limit} registrations from ${source} within ${this.limits.rate.windowMs / 1000} s; retry in ${e.state.reset} s`,
        {
          status: 429,
          redirectable: false,
          retryAfter: e.state.reset,
          hint: 'Register a client once and keep its client_id. The rate is set by serve --registration-rate (startEmulator({ registrationRate })).',
        },
      );
    }
  }

  /** Throws 503 `temporarily_unavailable` when the table holds `maxClients` clients. */
  checkRoom(now: number): void {
    if (this.#clients.size < this.limits.maxClients) return;
    // Retention's rule applied now, not at the next prune (a timer of real time): room that is due is there at once.
    if (dropUnusedClients(this.repo, now, this.retention) > 0 && this.#clients.size < this.limits.maxClients) return;
    const next = nextUnusedClientExpiry(this.repo, this.retention);
    const retryAfter = Math.max(1, Math.ceil(((next ?? now + this.retention.unusedClients) - now) / 1000));
    throw new OAuthError(
      'temporarily_unavailable',
      `${this.#clients.size} clients are registered, the most this emulator keeps; ${
        next === null ? 'every one has a grant, so none goes by itself' : `the next never-used client goes in ${retryAfter} s`
      }`,
      {
        status: 503,
        redirectable: false,
        retryAfter,
        hint:
          `Reuse a registered client_id, or raise the cap: serve --max-clients N (startEmulator({ maxClients: N })); clients never ` +
          `used go ${Math.round(this.retention.unusedClients / 1000)} s after their registration (serve --retention unused-clients=DURATION).`,
      },
    );
  }
}
