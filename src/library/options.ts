import { parseConsentPolicy } from '../core/emulation/consent-policy.js';
import type { FaultSpec } from '../core/emulation/fault-spec.js';
import type { VaryUnspecified } from '../core/emulation/variation.js';
import type { VariantProfile } from '../core/emulation/variant-profile.js';
import type { EmulatorOptions } from '../server/emulator.js';

/** What `startEmulator` takes (src/index.ts), in this process or as a child. */
export interface StartEmulatorOptions {
  /** `system` (default): real time. `manual`: time stands still until `clock.advance()`; a number starts it there (epoch ms). */
  clock?: 'system' | 'manual' | number;
  /** `in-process` (default) or `child`: a separate `agent-access serve` process, stopped by `stop()`. */
  mode?: 'in-process' | 'child';
  /** Ports; default 0 (free ports). */
  port?: number;
  authPort?: number;
  /** A state file; default: in memory. */
  state?: string;
  fixtures?: string;
  /** A scenario file loaded into the new state (docs/emulator-control.md: "Scenarios and snapshots"). */
  scenario?: string;
  /** Per grant on the REST allowlist, e.g. `60/min`. */
  rateLimit?: string;
  /** Registered clients at most (`serve --max-clients`); default 5 000. */
  maxClients?: number;
  /** Registrations per source address, e.g. `600/min` (`serve --registration-rate`, the default). */
  registrationRate?: string;
  /** Open connections at most, over both servers (`serve --max-connections`); default 512. */
  maxConnections?: number;
  /**
   * Who answers the consent screen for every client: `page` (a person, the default), `approve`, `deny`, or approve
   * a subset of what is requested (`{ decision: 'approve', scopes: ['ask'] }`). Change it later with `consent.set`.
   */
  consent?: ConsentInput['decision'] | ConsentInput;
  /** Faults armed from the start (see `faults.add`). */
  faults?: FaultSpec[];
  /**
   * Vary what the spec leaves open (`serve --vary-unspecified`): `{ seed }` repeats a run exactly, `true` picks a
   * random seed (read it from `varyUnspecified` of the result). Default: off.
   */
  varyUnspecified?: boolean | VaryUnspecified;
  /**
   * Answer like a real server was seen to (`serve --profile`, issue 43): a profile file (`conformance server
   * --record-profile`), or, in-process only, the profile itself. Its dimensions are pinned, the rest as without it.
   */
  profile?: string | VariantProfile;
  /** In-process only: any other emulator option (prices, timings, ask timeout, ...). */
  emulator?: Omit<
    EmulatorOptions,
    | 'clock'
    | 'port'
    | 'authPort'
    | 'state'
    | 'inMemory'
    | 'fixtures'
    | 'rateLimit'
    | 'maxClients'
    | 'registrationRate'
    | 'maxConnections'
    | 'consent'
    | 'faults'
    | 'varyUnspecified'
    | 'profile'
    | 'scenario'
  >;
}

export interface ConsentInput {
  decision: 'page' | 'approve' | 'deny';
  /** With `approve`: grant only the requested scopes that are in this list. */
  scopes?: string[];
  /** One client only; default: every client without a policy of its own. */
  clientId?: string;
}

/** The start-up consent policy, checked before anything starts. */
export function consentOption(options: StartEmulatorOptions) {
  if (options.consent === undefined) return undefined;
  const input = typeof options.consent === 'string' ? { decision: options.consent } : options.consent;
  return { clientId: input.clientId ?? null, policy: parseConsentPolicy(input) };
}
