import type { FastifyInstance } from 'fastify';
import type { Prices } from '../core/state/charges.js';
import type { Clock } from '../core/state/clock.js';
import type { ConsentPolicy } from '../core/emulation/consent-policy.js';
import type { Lifetimes } from '../core/context.js';
import type { Core } from '../core/core.js';
import type { FaultSpec } from '../core/emulation/fault-spec.js';
import type { JobTimings } from '../core/resources/jobs.js';
import type { RateLimitConfig } from '../core/state/rate-limit.js';
import type { Retention } from '../core/oauth/retention.js';
import type { VariantProfile } from '../core/emulation/variant-profile.js';
import type { VaryUnspecified } from '../core/emulation/variation.js';
import type { RequestObserver } from './observer.js';
import type { SchemaCompilers } from './route-schemas.js';

/** The profile an emulator answers with, as its ready line and banner name it. */
export interface ProfileInUse {
  /** The file's name (or the profile's server, for a profile given as an object): what the Agent-Access-Variant header names. */
  name: string;
  /** The file's absolute path; null for a profile given as an object. */
  file: string | null;
  /** The server the profile was recorded from. */
  server: string;
  /** `kind.dimension` pinned to the observed variant. */
  pinned: string[];
  /** `kind.dimension` the server answered in a shape the emulator cannot mimic yet: not pinned. */
  not_pinned: string[];
}

export interface EmulatorOptions {
  /** `{base_url}` port; 0 picks a free one. Default 4100. */
  port?: number;
  /** `{auth_url}` port; 0 picks a free one. Default 4101. */
  authPort?: number;
  /** Interface to bind. Default 127.0.0.1, and then ::1 too at the same ports (where the machine has it). */
  host?: string;
  /**
   * False: nothing is bound, and requests reach the service only through `Emulator.inject` (tests of the HTTP rules in
   * one process, without sockets). Its URLs name `port` and `authPort`, which must then be given; no admin file is
   * written (no other process could reach it). Default true.
   */
  listen?: boolean;
  /** State file; default `.agent-access/state.json` in the working directory. Ignored with `inMemory`. */
  state?: string;
  inMemory?: boolean;
  /** Directory with persons.json (and optionally grants.json). Default: the package's fixtures. */
  fixtures?: string;
  /**
   * A scenario file (docs/emulator-control.md: "Scenarios and snapshots") loaded into a new state. A state file that exists must
   * have been created from the same scenario (same content), or the start fails and leaves it untouched.
   */
  scenario?: string;
  clock?: Clock;
  lifetimes?: Partial<Lifetimes>;
  /** Price of each charged operation in AKh (spec 1). */
  prices?: Partial<Prices>;
  /** Per grant on the allowlist routes, e.g. `60/min` (spec 7, 8). Default 60/min. */
  rateLimit?: string | RateLimitConfig;
  /** POST /chat/ask is abandoned after this many ms (default 30 000). */
  askTimeoutMs?: number;
  /** Simulated thinking time of an ask in ms (default 0). */
  askLatencyMs?: number;
  /** Research and training durations on the emulator clock (default: quick; see REALISTIC_TIMINGS). */
  timings?: Partial<JobTimings>;
  /** Who answers the consent screen from the start: for all clients (`clientId` null) or one (emulator control). */
  consent?: Array<{ clientId: string | null; policy: ConsentPolicy }>;
  /** Faults armed from the start (emulator control); more can be armed through the admin API. */
  faults?: FaultSpec[];
  /**
   * Vary what the spec leaves open (status values, shapes of sources, citations, report and error, unknown fields, …),
   * chosen deterministically from `seed`; see docs/emulator-control.md "Varying what the spec leaves open". Default: off.
   */
  varyUnspecified?: VaryUnspecified | false;
  /**
   * Answer like a real server was seen to answer (`serve --profile`, issue 43): a profile file's path, or a profile
   * (named by its server). Its dimensions are pinned; the others are the emulator's own, or vary with `varyUnspecified`.
   */
  profile?: string | VariantProfile;
  /** How long finished records stay in the state, on the emulator clock (docs/serve.md "Retention"). */
  retention?: Partial<Retention>;
  /** Registered clients at most (default 5 000); a registration beyond answers 503 (docs/serve.md "Endpoints", **Limits**). */
  maxClients?: number;
  /** Registrations per source address on the emulator clock, e.g. `600/min` (the default); beyond answers 429. */
  registrationRate?: string | RateLimitConfig;
  /**
   * Open connections of both servers together (default 512, docs/serve.md "Endpoints", **Limits**): at the bound the oldest
   * idle one is closed for a new one, and a new one is answered 503 when every one has a request in flight.
   */
  maxConnections?: number;
  /** Fold the state file's journal into it once the journal holds this many bytes and as many as the state file (the larger of the two). Default 8 MiB. */
  journalLimit?: number;
  /**
   * What the start repaired or waited for on its own after a crash, one line each, for the person at the terminal
   * (`serve` prints them on stderr): a wait on the state file's lock (whose holder, how old), a lock taken over from
   * a holder that is gone, uncommitted charge-ledger lines dropped; and, once, that ::1 could not be listened on
   * too. Default: process.emitWarning.
   */
  onNotice?: (line: string) => void;
  /**
   * Where errors that no request can report go: server errors of requests (500s), a lost state-file lock, state
   * files removed under a running emulator (`state`: it stops acknowledging writes, and stops).
   */
  onError?: (error: Error, context: 'request' | 'lock' | 'state' | 'prune' | 'settle' | 'warm-up' | 'admin file') => void;
  /** Adds routes to `{base_url}` before it listens (used by later parts and by tests that probe the guard). */
  extendApi?: (app: FastifyInstance, core: Core) => void | Promise<void>;
  /**
   * Where the servers' validators and serializers come from. Default: the code `npm run build` generated, each used
   * while it matches its route's schema; the rest is compiled as the routes register (and the start says so).
   */
  schemaCompilers?: SchemaCompilers;
  /** Sees every request of the service with its headers, body and answer (`conformance client` grades clients by it). */
  observer?: RequestObserver;
}
