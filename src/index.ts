/**
 * The programmatic API: start the emulated Agent Access Service from test code or CI scripts, in this process or
 * as a child `agent-access serve`, and control it (clock, tokens without the browser, snapshots) through its admin API, the
 * same way in both cases.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { adminRequest } from './protocol/admin-client.js';
import { ADMIN_ROUTES, adminPath, allPages } from './protocol/admin-api.js';
import { ManualClock, systemClock } from './core/clock.js';
import type { TokenResponse } from './core/grants/index.js';
import { Emulator, type EmulatorOptions, type ProfileInUse } from './server/emulator.js';
import type { VariantProfile } from './core/variant-profile.js';
import { parseConsentPolicy, type ConsentPolicyView } from './core/consent-policy.js';
import type { PendingAction } from './core/actions.js';
import type { GrantView } from './core/grants-admin.js';
import type { Fault } from './core/faults.js';
import { parseFaultSpec, type FaultSpec } from './core/fault-spec.js';
import { checkSeed, type VaryUnspecified } from './core/variation.js';
import type { SnapshotInfo, SnapshotList } from './server/snapshots.js';
import { FindingsError, findingsAtOrAbove, type Finding, type FindingSeverity, type FindingsList } from './protocol/findings.js';

export { Emulator, type EmulatorOptions, type ProfileInUse } from './server/emulator.js';
export {
  parseProfile,
  recordProfile,
  type ObservedResponse,
  type ObservedStep,
  type ProfiledDimension,
  type VariantProfile,
} from './core/variant-profile.js';
export type { SnapshotInfo, SnapshotList } from './server/snapshots.js';
export { ManualClock, parseDuration, type Clock } from './core/clock.js';
export type { AppEvent, EventMap, EventName } from './core/events.js';
export { AdminError } from './protocol/admin-client.js';
export { FINDINGS, FindingsError, formatFinding, type Finding, type FindingCode, type FindingSeverity } from './protocol/findings.js';
export type { ConsentPolicy, ConsentPolicyView } from './core/consent-policy.js';
export type { Fault } from './core/faults.js';
export type { FaultKind, FaultSpec } from './core/fault-spec.js';
export type { VaryUnspecified } from './core/variation.js';
export {
  runClientConformance,
  CommandNotStartedError,
  ConformanceUsageError,
  CONSENT_OPENER,
  type ClientConformanceOptions,
} from './conformance/runner.js';
export type { CheckReport, ConformanceReport, ScenarioReport, Verdict } from './conformance/report.js';
export { SCENARIOS as CONFORMANCE_SCENARIOS, SUITES as CONFORMANCE_SUITES } from './conformance/scenarios.js';

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

export interface IssueTokensOptions {
  /** Scopes of the grant, e.g. `['ask', 'research']`; checked as at /authorize (retired scopes are refused). */
  scopes: string[];
  /** An identity token (no `resource`): refused by the API, as real identity tokens are. Default false. */
  identity?: boolean;
  /** An existing client; default: a new client is registered. */
  clientId?: string;
  clientName?: string;
  /** A person of the fixtures; default: the default person. */
  personId?: string;
}

export interface ConsentInput {
  decision: 'page' | 'approve' | 'deny';
  /** With `approve`: grant only the requested scopes that are in this list. */
  scopes?: string[];
  /** One client only; default: every client without a policy of its own. */
  clientId?: string;
}

export type IssuedTokens = TokenResponse & { client_id: string; grant_id: string };

export interface RunningEmulator {
  readonly baseUrl: string;
  readonly authUrl: string;
  readonly issuer: string;
  readonly adminUrl: string;
  readonly adminToken: string;
  /** The variation mode it runs in, with its seed, or false. */
  readonly varyUnspecified: VaryUnspecified | false;
  /** The profile it answers with: its name, file, server, the dimensions pinned and those not; or null. */
  readonly profile: ProfileInUse | null;
  readonly clock: {
    readonly mode: 'system' | 'manual';
    /** The emulator's time, epoch ms. */
    now(): Promise<number>;
    /**
     * Moves a manual clock forward (`"16m"`, `"24h"`, `"23h59m"`, `900_000`; see parseDuration): access-token expiry, code lifetime, the 24-hour
     * idempotency window, rate-limit windows, research and training all move together; resolves once jobs caught up.
     */
    advance(by: string | number): Promise<number>;
  };
  /**
   * A test shortcut around the consent screen: a grant as if the person had clicked "Zulassen", and its first
   * tokens (real ones: refresh, revocation and the resource guard treat them as any other). Use the browser flow
   * (`agent-access login`, or your client) when the flow itself is under test.
   */
  issueTokens(options: IssueTokensOptions): Promise<IssuedTokens>;
  /**
   * Consent as code: the consent page is answered by the policy through the same decision its form posts, and
   * recorded as the policy's answer (events, dashboard), so a test runs the real flow without a person.
   */
  readonly consent: {
    set(policy: ConsentInput): Promise<ConsentPolicyView>;
    get(): Promise<ConsentPolicyView>;
  };
  /**
   * Faults on purpose: 429s, 5xx on a route, latency, ask timeouts, failing research, a stored refresh-token replay,
   * a revocation at a chosen moment. Each is listed in the dashboard and marked in the request log.
   */
  readonly faults: {
    add(spec: FaultSpec): Promise<Fault>;
    list(): Promise<Fault[]>;
    /** One fault, or every armed one. */
    clear(id?: string): Promise<Fault[]>;
  };
  /** Scripted actions of the person, recorded as theirs: revoke in settings, approve or reject a write action. */
  readonly person: {
    revokeGrant(grantId: string): Promise<GrantView>;
    /** Write actions of the agent plane; `pending` ones wait for the person. */
    actions(status?: PendingAction['status']): Promise<PendingAction[]>;
    decideAction(actionId: string, decision: 'approve' | 'reject'): Promise<PendingAction>;
  };
  /**
   * The whole state, saved and brought back exactly: the state file and the charge ledger byte for byte (kept in
   * memory for an in-memory emulator), and a manual clock's time. `reset()` returns to the state as it was created
   * (the scenario, else the fixtures). Names: 1–64 letters, digits, `.`, `_`, `-`, starting with a letter or digit.
   */
  readonly snapshots: {
    save(name: string): Promise<SnapshotInfo>;
    restore(name: string): Promise<SnapshotInfo>;
    reset(): Promise<SnapshotInfo>;
    list(): Promise<SnapshotList>;
  };
  /**
   * Client findings: what the emulator noticed about the clients' traffic that their developers should change
   * (parallel refreshes, identity tokens at /mcp, retries without Idempotency-Key, ...), most severe first. They never
   * change what a client receives. `minSeverity` keeps those at or above it.
   */
  findings(options?: { minSeverity?: FindingSeverity }): Promise<Finding[]>;
  /**
   * Rejects with a FindingsError that lists every finding at or above `failOn` (default `warning`) with its hint;
   * resolves when there is none. Made for a test suite's `afterAll`.
   */
  assertNoFindings(options?: { failOn?: FindingSeverity }): Promise<void>;
  /** Forgets every finding (and what the detectors remembered); resolves with how many there were. */
  clearFindings(): Promise<number>;
  /** Stops the emulator (in flight requests finish, state is flushed). */
  stop(): Promise<void>;
}

interface Endpoints {
  baseUrl: string;
  authUrl: string;
  issuer: string;
  adminUrl: string;
  adminToken: string;
  varyUnspecified: VaryUnspecified | false;
  profile: ProfileInUse | null;
}

const admin = <T>(e: Endpoints, method: 'GET' | 'POST' | 'DELETE', path: string, body?: unknown): Promise<T> =>
  adminRequest<T>({ adminUrl: e.adminUrl, token: e.adminToken }, method, path, body);

/** Every finding, page after page (GET /_admin/findings is paged). */
const allFindings = (e: Endpoints) => allPages('findings', ADMIN_ROUTES.findings, (path) => admin<FindingsList>(e, 'GET', path));

function controls(e: Endpoints, mode: 'system' | 'manual', stop: () => Promise<void>): RunningEmulator {
  return {
    ...e,
    clock: {
      mode,
      now: async () => (await admin<{ now: number }>(e, 'GET', ADMIN_ROUTES.clock)).now,
      advance: async (by) => (await admin<{ now: number }>(e, 'POST', ADMIN_ROUTES.advanceClock, { by })).now,
    },
    issueTokens: (o) =>
      admin<IssuedTokens>(e, 'POST', ADMIN_ROUTES.tokens, {
        scopes: o.scopes,
        identity: o.identity,
        client_id: o.clientId,
        client_name: o.clientName,
        person_id: o.personId,
      }),
    consent: {
      set: (p) =>
        admin<ConsentPolicyView>(e, 'POST', ADMIN_ROUTES.consent, { decision: p.decision, scopes: p.scopes, client_id: p.clientId }),
      get: () => admin<ConsentPolicyView>(e, 'GET', ADMIN_ROUTES.consent),
    },
    faults: {
      add: async (spec) => (await admin<{ fault: Fault }>(e, 'POST', ADMIN_ROUTES.faults, spec)).fault,
      list: async () => (await admin<{ faults: Fault[] }>(e, 'GET', ADMIN_ROUTES.faults)).faults,
      clear: async (id) =>
        (await admin<{ cleared: Fault[] }>(e, 'DELETE', id === undefined ? ADMIN_ROUTES.faults : adminPath('fault', { id }))).cleared,
    },
    person: {
      revokeGrant: async (id) => (await admin<{ grant: GrantView }>(e, 'POST', `${adminPath('revokeGrant', { id })}?by=person`)).grant,
      actions: async (status) =>
        (
          await admin<{ actions: PendingAction[] }>(
            e,
            'GET',
            `${ADMIN_ROUTES.actions}${status ? `?status=${encodeURIComponent(status)}` : ''}`,
          )
        ).actions,
      decideAction: async (id, decision) =>
        (await admin<{ action: PendingAction }>(e, 'POST', adminPath('decideAction', { id }), { decision })).action,
    },
    findings: async (options = {}) => {
      const findings = await allFindings(e);
      return options.minSeverity ? findingsAtOrAbove(findings, options.minSeverity) : findings;
    },
    assertNoFindings: async ({ failOn = 'warning' } = {}) => {
      const failing = findingsAtOrAbove(await allFindings(e), failOn);
      if (failing.length > 0) throw new FindingsError(failing, failOn);
    },
    clearFindings: async () => (await admin<{ cleared: number }>(e, 'DELETE', ADMIN_ROUTES.findings)).cleared,
    snapshots: {
      save: (name) => admin<SnapshotInfo>(e, 'POST', adminPath('saveSnapshot', { name })),
      restore: (name) => admin<SnapshotInfo>(e, 'POST', adminPath('restoreSnapshot', { name })),
      reset: () => admin<SnapshotInfo>(e, 'POST', ADMIN_ROUTES.reset),
      list: () => admin<SnapshotList>(e, 'GET', ADMIN_ROUTES.snapshots),
    },
    stop,
  };
}

const BIN = fileURLToPath(new URL('../bin/agent-access.js', import.meta.url));

const READY_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 15_000;

async function startChild(options: StartEmulatorOptions, mode: 'system' | 'manual'): Promise<RunningEmulator> {
  if (typeof options.clock === 'number')
    throw new Error('a child emulator starts its manual clock at the current time; pass clock: "manual"');
  if (options.emulator) throw new Error('the `emulator` options apply in-process only; a child takes serve flags');
  const args = [
    'serve',
    '--json',
    '--quiet',
    '--port',
    String(options.port ?? 0),
    '--auth-port',
    String(options.authPort ?? 0),
    '--clock',
    mode,
    ...(options.state ? ['--state', options.state] : ['--in-memory']),
  ];
  if (options.fixtures) args.push('--fixtures', options.fixtures);
  if (options.scenario) args.push('--scenario', options.scenario);
  if (options.rateLimit) args.push('--rate-limit', options.rateLimit);
  if (options.maxClients !== undefined) args.push('--max-clients', String(options.maxClients));
  if (options.registrationRate) args.push('--registration-rate', options.registrationRate);
  if (options.maxConnections !== undefined) args.push('--max-connections', String(options.maxConnections));
  const consent = consentOption(options);
  for (const spec of options.faults ?? []) args.push('--fault', JSON.stringify(spec));
  if (consent)
    args.push(
      '--consent',
      `${consent.clientId ? `${consent.clientId}:` : ''}${consent.policy.decision}` +
        `${consent.policy.decision === 'approve' && consent.policy.scopes ? `=${consent.policy.scopes.join(',')}` : ''}`,
    );
  if (options.varyUnspecified)
    args.push(options.varyUnspecified === true ? '--vary-unspecified' : `--vary-unspecified=${checkSeed(options.varyUnspecified.seed)}`);
  if (options.profile !== undefined) {
    if (typeof options.profile !== 'string') throw new TypeError('profile: a child emulator takes a profile file, not a profile object');
    args.push('--profile', options.profile);
  }
  const child: ChildProcess = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  // The child never outlives this process, even when a test run ends without calling stop().
  const killChild = () => child.kill('SIGKILL');
  process.once('exit', killChild);
  // The newest stderr only, for the error message of a failed start.
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr = (stderr + String(d)).slice(-16_384)));
  const exited = once(child, 'exit');
  let line: string;
  try {
    line = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`agent-access serve was not ready within ${READY_TIMEOUT_MS / 1000} s: ${stderr.trim()}`)),
        READY_TIMEOUT_MS,
      );
      createInterface({ input: child.stdout! }).once('line', (l) => {
        clearTimeout(timer);
        resolve(l);
      });
      exited.then(
        ([code]) => reject(new Error(`agent-access serve exited with ${code}: ${stderr.trim()}`)),
        (e: Error) => reject(new Error(`agent-access serve could not start: ${e.message}`)),
      );
    });
  } catch (e) {
    killChild();
    process.off('exit', killChild);
    throw e;
  }
  const ready = JSON.parse(line) as {
    base_url: string;
    auth_url: string;
    issuer: string;
    admin_url: string;
    admin_token: string;
    vary_unspecified?: VaryUnspecified;
    profile?: ProfileInUse;
  };
  const e: Endpoints = {
    baseUrl: ready.base_url,
    authUrl: ready.auth_url,
    issuer: ready.issuer,
    adminUrl: ready.admin_url,
    adminToken: ready.admin_token,
    varyUnspecified: ready.vary_unspecified ?? false,
    profile: ready.profile ?? null,
  };
  let stopping: Promise<void> | undefined;
  return controls(
    e,
    mode,
    () =>
      (stopping ??= (async () => {
        if (child.exitCode === null && child.signalCode === null) {
          child.kill('SIGTERM');
          // A clean stop flushes the state; one that hangs is cut off.
          const timer = setTimeout(killChild, STOP_TIMEOUT_MS);
          await exited.catch(() => undefined);
          clearTimeout(timer);
        }
        process.off('exit', killChild);
      })()),
  );
}

/** The start-up consent policy, checked before anything starts. */
function consentOption(options: StartEmulatorOptions) {
  if (options.consent === undefined) return undefined;
  const input = typeof options.consent === 'string' ? { decision: options.consent } : options.consent;
  return { clientId: input.clientId ?? null, policy: parseConsentPolicy(input) };
}

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
