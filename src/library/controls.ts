import type { ConsentPolicyView } from '../core/emulation/consent-policy.js';
import type { PendingAction } from '../core/resources/actions.js';
import type { Fault } from '../core/emulation/faults.js';
import type { FaultSpec } from '../core/emulation/fault-spec.js';
import type { TokenResponse } from '../core/oauth/grants/index.js';
import type { GrantView } from '../core/oauth/grants-admin.js';
import type { VaryUnspecified } from '../core/emulation/variation.js';
import { ADMIN_ROUTES, adminPath, allPages } from '../protocol/admin-api.js';
import { adminRequest } from '../protocol/admin-client.js';
import { FindingsError, findingsAtOrAbove, type Finding, type FindingSeverity, type FindingsList } from '../protocol/findings.js';
import type { ProfileInUse } from '../server/emulator.js';
import type { SnapshotInfo, SnapshotList } from '../server/snapshots.js';
import type { ConsentInput } from './options.js';

/**
 * A running emulator's controls: the same calls to its admin API whether it runs in this process or as a child
 * (child.ts), so a test reads the same either way.
 */

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

/** Where a running emulator answers, from its ready line or the in-process emulator. */
export interface Endpoints {
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

export function controls(e: Endpoints, mode: 'system' | 'manual', stop: () => Promise<void>): RunningEmulator {
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
