import type { FastifyInstance } from 'fastify';
import { AgentPlane, replayWorkspaceChanges } from '../core/resources/agent-plane.js';
import { systemClock } from '../core/state/clock.js';
import { setConsentPolicy } from '../core/oauth/consent.js';
import { Core } from '../core/core.js';
import { randomToken } from '../core/state/crypto.js';
import { Faults } from '../core/emulation/faults.js';
import { QUICK_TIMINGS, type JobTimings } from '../core/resources/jobs.js';
import type { StatePersistence } from '../core/state/persistence.js';
import { parseRateLimit } from '../core/state/rate-limit.js';
import { ResourceService, type Sleep } from '../core/resources/resource-service.js';
import { pinsOf } from '../core/emulation/variant-profile.js';
import { Variation, type VaryUnspecified } from '../core/emulation/variation.js';
import { WORKSPACE_KINDS } from '../core/resources/workspace.js';
import type { Fixtures } from '../loaders/fixtures.js';
import type { LoadedProfile } from '../loaders/profile.js';
import { FileSnapshotStore, MemorySnapshotStore, snapshotDirFor } from '../store/snapshot-store.js';
import { buildApiApp } from './api-app.js';
import { buildAuthApp } from './auth-app.js';
import { BrowserSessions } from './browser-session.js';
import type { EmulatorOptions } from './emulator-options.js';
import { isLoopbackBind } from './host-guard.js';
import { PrecompiledSchemas, type SchemaCompilers } from './route-schemas.js';
import { Snapshots } from './snapshots.js';
import { WarmUpRequests } from './warm-up-request.js';

/** The real-time wait the core is given for the ask latency and timeout; cancelling clears its timer. */
const realTimeSleep: Sleep = (ms) => {
  let timer: NodeJS.Timeout | undefined;
  const done = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
  });
  return { done, cancel: () => clearTimeout(timer) };
};

/** What the wiring needs that the start has settled first: the state, the fixtures, the mode and where it binds. */
export interface WiringInput {
  options: EmulatorOptions;
  host: string;
  persistence: StatePersistence;
  statePath: string | null;
  fixtures: Fixtures;
  varyUnspecified: VaryUnspecified | false;
  profile: Omit<LoadedProfile, 'file'> | null;
  onError: NonNullable<EmulatorOptions['onError']>;
  /** Locks a new state file by its identity too (lock.ts), once the core has made it. */
  identify: () => Promise<void>;
}

/** Everything an emulator is made of, built and connected, not yet listening. */
export interface Wired {
  core: Core;
  resources: ResourceService;
  plane: AgentPlane;
  faults: Faults;
  snapshots: Snapshots;
  api: FastifyInstance;
  auth: FastifyInstance;
  adminToken: string;
  /** The ports the apps listen on, once they do; a request is served only when its port is known. */
  ports: { api?: number; auth?: number };
  warmUp: WarmUpRequests;
  schemaCompilers: SchemaCompilers;
  /** Set once: what else follows a snapshot restore (the admin file, which exists only once listening). */
  afterRestore: { also?: () => void };
  /** Whether the emulator is stopping: the apps answer new requests with a polite close then. */
  lifecycle: { stopping: boolean };
}

/**
 * The composition: the core on its persistence, the faults, consent policies, the resource service, the agent plane,
 * snapshots, and both apps over them. Builds; listens on nothing (the lifecycle does).
 */
export async function wire(input: WiringInput): Promise<Wired> {
  const { options, persistence, fixtures, onError } = input;
  const timings: JobTimings = { ...QUICK_TIMINGS, ...options.timings };
  // The schema validator loads only when a scenario is given: it is not on every start's path.
  const scenario = options.scenario ? await (await import('../loaders/scenario.js')).loadScenario(options.scenario, fixtures) : undefined;
  const core = await Core.open({
    clock: options.clock ?? systemClock,
    persistence,
    persons: fixtures.persons,
    lifetimes: options.lifetimes,
    retention: options.retention,
    registration: {
      ...(options.maxClients !== undefined ? { maxClients: options.maxClients } : {}),
      ...(options.registrationRate !== undefined
        ? { rate: typeof options.registrationRate === 'string' ? parseRateLimit(options.registrationRate) : options.registrationRate }
        : {}),
    },
    seedGrants: fixtures.grants,
    ...(scenario ? { scenario: { ...scenario, timings } } : {}),
  });
  // A new state file exists now: it is locked by its identity too (lock.ts), as one that existed was at once.
  await input.identify();
  for (const { clientId, policy } of options.consent ?? []) setConsentPolicy(core, clientId, policy);
  const faults = new Faults(core);
  for (const spec of options.faults ?? []) faults.arm(spec);
  const adminToken = randomToken(32);
  const ports: Wired['ports'] = {};
  const lifecycle = { stopping: false };
  // The fixtures' workspace as loaded: a snapshot restore starts from it again.
  const pristine = structuredClone(fixtures.workspace);
  // Changes the person approved on the agent plane, replayed over the fixtures' workspace.
  const replay = () => replayWorkspaceChanges(fixtures.workspace, core, (message) => onError(new Error(message), 'warm-up'));
  const rebuildWorkspace = () => {
    for (const kind of WORKSPACE_KINDS) fixtures.workspace[kind] = structuredClone(pristine[kind]);
    replay();
  };
  replay();
  const resources = new ResourceService(core, {
    workspace: fixtures.workspace,
    sleep: realTimeSleep,
    knowledge: fixtures.knowledge,
    prices: options.prices,
    rateLimit: typeof options.rateLimit === 'string' ? parseRateLimit(options.rateLimit) : options.rateLimit,
    askTimeoutMs: options.askTimeoutMs,
    askLatencyMs: options.askLatencyMs,
    timings: options.timings,
    faults,
    variation:
      input.varyUnspecified || input.profile
        ? new Variation(
            input.varyUnspecified ? input.varyUnspecified.seed : null,
            input.profile ? { name: input.profile.name, pins: pinsOf(input.profile.profile) } : null,
          )
        : null,
  });
  const plane = new AgentPlane(core, resources, fixtures.workspace);
  // After a restore, what lives in memory beside the state follows it: the workspace, search, rate limits.
  const afterRestore: Wired['afterRestore'] = {};
  const snapshots = new Snapshots(
    core,
    input.statePath ? new FileSnapshotStore(snapshotDirFor(input.statePath)) : new MemorySnapshotStore(),
    () => {
      rebuildWorkspace();
      resources.reload();
      afterRestore.also?.();
    },
  );
  // A commit that failed was rolled back (its requests answered 500): the workspace and search follow the state.
  core.repo.onRollBack((heads) => {
    if (heads.has('workspace_changes')) rebuildWorkspace();
    if (heads.has('workspace_changes') || heads.has('training_documents') || heads.has('shared_knowledge')) resources.reindex();
  });
  // The state as created is what `reset` returns to.
  if (core.created) await snapshots.captureBaseline();
  // One session store for both origins: the browser sends {auth_url}'s cookie to {base_url} too (cookies ignore
  // ports); the auth port in its name keeps two emulators in one browser apart.
  const sessions = new BrowserSessions(
    () => core.defaultPerson.id,
    () => `aa_session_${ports.auth ?? 0}`,
  );
  const schemaCompilers = options.schemaCompilers ?? PrecompiledSchemas.load();
  const warmUp = new WarmUpRequests();
  const common = {
    faults,
    warmUp,
    sessions,
    checkHost: isLoopbackBind(input.host),
    bindHost: input.host,
    stopping: () => lifecycle.stopping,
    onServerError: (error: Error) => onError(error, 'request'),
    observer: options.observer,
  };
  // The signing keys are imported before the ready line: the first token request is served at full speed.
  const [api, auth] = await Promise.all([
    buildApiApp(
      core,
      {
        ...common,
        port: () => ports.api,
        schemaController: schemaCompilers.schemaController('api'),
        adminToken,
        resources,
        plane,
        snapshots,
        workspace: fixtures.workspace,
      },
      options.extendApi ? (app) => options.extendApi!(app, core) : undefined,
    ),
    buildAuthApp(core, {
      ...common,
      port: () => ports.auth,
      schemaController: schemaCompilers.schemaController('auth'),
      plane,
      prices: resources.prices,
      documents: (person, id) => resources.documentFor(person, id),
    }),
    core.warmUp(),
  ]);
  return { core, resources, plane, faults, snapshots, api, auth, adminToken, ports, warmUp, schemaCompilers, afterRestore, lifecycle };
}
