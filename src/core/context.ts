import type { AccessTokenSigner } from './oauth/access-token.js';
import type { Arrivals } from './emulation/arrivals.js';
import type { ChargeEntry } from './state/charges.js';
import type { ConsentPolicies } from './emulation/consent-policy.js';
import { DAY, MINUTE, type Clock } from './state/clock.js';
import type { EventBus } from './state/events.js';
import type { ConsentScreens } from './oauth/consent-screens.js';
import type { ServiceUrls } from './oauth/metadata.js';
import type { Person } from './state/persons.js';
import type { RegistrationGate } from './oauth/registration-gate.js';
import type { ReadonlyState, Repository } from './state/repository.js';
import type { TokenFamily } from './state/state.js';

export interface Lifetimes {
  /** Spec 2.2, 5.3, 8: 900 seconds. */
  accessToken: number;
  /** Not shown in the spec: 60 seconds (OAuth 2.1 §4.1.2 asks for short-lived codes). */
  code: number;
  /** Not shown in the spec: 30 days from issue of each rotated token. */
  refreshToken: number;
  /** How long a consent page can be answered. */
  interaction: number;
}

export const DEFAULT_LIFETIMES: Lifetimes = { accessToken: 15 * MINUTE, code: MINUTE, refreshToken: 30 * DAY, interaction: 10 * MINUTE };

/**
 * What the core's modules share, and all they know of the core: `Core` (core.ts) implements it. The rules
 * (registration, consent, the token endpoint and its grant types, the resource guard, revocation, grants, the
 * scenario) and the services (metering, the agent plane, faults, findings, the overview, reports) take this, never
 * the `Core` class: each depends on what it uses, and the core can call any of them without an import circle. Only
 * the composition root and the adapters hold a `Core` (docs/architecture.md). The state changes only through
 * `repo`; `state` is for reading.
 */
export interface CoreContext {
  readonly clock: Clock;
  readonly events: EventBus;
  readonly persons: readonly Person[];
  readonly lifetimes: Lifetimes;
  /** The one way the state changes. */
  readonly repo: Repository;
  readonly state: ReadonlyState;
  /** Signs and verifies access tokens with the state's signing key. */
  readonly signer: AccessTokenSigner;
  readonly urls: ServiceUrls;
  /** `{base_url}` (spec 4.1, RFC 8414). */
  readonly issuer: string;
  /** `{base_url}/mcp`, the one protected resource (RFC 8707, RFC 9728). */
  readonly resource: string;
  readonly defaultPerson: Person;
  /** Signs the consent screens and remembers which were answered (a restart asks again). */
  readonly consentScreens: ConsentScreens;
  /** Who answers the consent screen (emulator control): the person by default. */
  readonly consentPolicies: ConsentPolicies;
  /** What open registration admits: a rate per source, a number of clients. */
  readonly registrations: RegistrationGate;
  /** The order requests arrived in, which the transports number (arrivals.ts). */
  readonly arrivals: Arrivals;
  person(id: string): Person | undefined;
  /** Makes every change made so far durable. Concurrent calls share one write. */
  commit(): Promise<void>;
  /** Spec 1: one line of the charge ledger, and the totals; durable with the next commit. */
  recordCharge(entry: Omit<ChargeEntry, 'seq'>, bodySha256?: string): ChargeEntry;
  /** The family whose refresh tokens carry this handle (by its hash), if it is still in the state. */
  familyByHandle(handleHash: string): TokenFamily | undefined;
  /** Makes a new family findable by its handle; throws, before anything changed, if another family has that handle. */
  indexFamily(family: TokenFamily): void;
}
