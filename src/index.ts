/**
 * The programmatic API: start the emulated Agent Access Service from test code or CI scripts, in this process or
 * as a child `agent-access serve`, and control it (clock, tokens without the browser, snapshots) through its admin API, the
 * same way in both cases.
 */
import { randomInt } from 'node:crypto';
import { ManualClock, systemClock } from './core/state/clock.js';
import { Emulator } from './server/emulator.js';
import { parseFaultSpec } from './core/emulation/fault-spec.js';
import { startChild } from './library/child.js';
import { controls, type RunningEmulator } from './library/controls.js';
import { consentOption, type StartEmulatorOptions } from './library/options.js';

export { Emulator, type EmulatorOptions, type ProfileInUse } from './server/emulator.js';
export {
  parseProfile,
  recordProfile,
  type ObservedResponse,
  type ObservedStep,
  type ProfiledDimension,
  type VariantProfile,
} from './core/emulation/variant-profile.js';
export type { SnapshotInfo, SnapshotList } from './server/snapshots.js';
export { ManualClock, parseDuration, type Clock } from './core/state/clock.js';
export type { AppEvent, EventMap, EventName } from './core/state/events.js';
export { AdminError } from './protocol/admin-client.js';
export { FINDINGS, FindingsError, formatFinding, type Finding, type FindingCode, type FindingSeverity } from './protocol/findings.js';
export type { ConsentPolicy, ConsentPolicyView } from './core/emulation/consent-policy.js';
export type { Fault } from './core/emulation/faults.js';
export type { FaultKind, FaultSpec } from './core/emulation/fault-spec.js';
export type { VaryUnspecified } from './core/emulation/variation.js';
export {
  runClientConformance,
  CommandNotStartedError,
  ConformanceUsageError,
  CONSENT_OPENER,
  type ClientConformanceOptions,
  type ClientRun,
  type InProcessClient,
} from './conformance/runner.js';
export type { CheckReport, ConformanceReport, ScenarioReport, Verdict } from './conformance/report.js';
export { SCENARIOS as CONFORMANCE_SCENARIOS, SUITES as CONFORMANCE_SUITES } from './conformance/scenarios.js';
export type { ConsentInput, StartEmulatorOptions } from './library/options.js';
export type { IssuedTokens, IssueTokensOptions, RunningEmulator } from './library/controls.js';

/**
 * Starts the emulator on free loopback ports, in memory unless `state` is given.
 *
 * ```ts
 * const emu = await startEmulator({ clock: 'manual' });
 * const { access_token } = await emu.issueTokens({ scopes: ['ask'] });
 * await emu.clock.advance('16m'); // the access token has expired
 * await emu.stop();
 * ```
 */
export async function startEmulator(options: StartEmulatorOptions = {}): Promise<RunningEmulator> {
  if (typeof options.clock === 'number' && !Number.isFinite(options.clock))
    throw new RangeError(`clock: ${options.clock} is not a time (epoch milliseconds)`);
  // Checked here, so a bad fault fails the call rather than a child's start.
  for (const spec of options.faults ?? []) parseFaultSpec(spec, Date.now());
  const mode = options.clock === 'manual' || typeof options.clock === 'number' ? 'manual' : 'system';
  if (options.mode === 'child') return startChild(options, mode);
  const emulator = await Emulator.start({
    ...options.emulator,
    port: options.port ?? 0,
    authPort: options.authPort ?? 0,
    state: options.state,
    inMemory: options.state === undefined,
    fixtures: options.fixtures,
    scenario: options.scenario,
    rateLimit: options.rateLimit,
    maxClients: options.maxClients,
    registrationRate: options.registrationRate,
    maxConnections: options.maxConnections,
    consent: options.consent === undefined ? undefined : [consentOption(options)!],
    faults: options.faults,
    clock: mode === 'manual' ? new ManualClock(typeof options.clock === 'number' ? options.clock : Date.now()) : systemClock,
    varyUnspecified: options.varyUnspecified === true ? { seed: randomInt(1_000_000) } : options.varyUnspecified || false,
    ...(options.profile !== undefined ? { profile: options.profile } : {}),
  });
  const e = {
    baseUrl: emulator.baseUrl,
    authUrl: emulator.authUrl,
    issuer: emulator.issuer,
    adminUrl: emulator.adminUrl,
    adminToken: emulator.adminToken,
    varyUnspecified: emulator.varyUnspecified,
    profile: emulator.profile,
  };
  return controls(e, mode, () => emulator.stop());
}
