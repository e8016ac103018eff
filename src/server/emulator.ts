import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { StateFileError, StateLockedError } from '../core/errors.js';
import type { FastifyInstance } from 'fastify';
import { systemClock, type Clock } from '../core/clock.js';
import { AgentPlane, replayWorkspaceChanges } from '../core/agent-plane.js';
import { ResourceService, type Sleep } from '../core/resource-service.js';
import type { Prices } from '../core/charges.js';
import type { ConsentPolicy } from '../core/consent-policy.js';
import { setConsentPolicy } from '../core/consent.js';
import type { FaultSpec } from '../core/fault-spec.js';
import { Faults } from '../core/faults.js';
import { Core } from '../core/core.js';
import { AS_METADATA_PATH } from '../core/metadata.js';
import type { Lifetimes } from '../core/context.js';
import type { Retention } from '../core/retention.js';
import { QUICK_TIMINGS, type JobTimings } from '../core/jobs.js';
import { parseRateLimit, type RateLimitConfig } from '../core/rate-limit.js';
import { randomToken } from '../core/crypto.js';
import { checkSeed, type VaryUnspecified } from '../core/variation.js';
import type { StatePersistence } from '../core/persistence.js';
import { MemoryPersistence } from '../store/memory-persistence.js';
import { FilePersistence } from '../store/file-persistence.js';
import { loadFixtures } from '../store/fixtures.js';
import { FileSnapshotStore, MemorySnapshotStore, snapshotDirFor } from '../store/snapshot-store.js';
import { WORKSPACE_KINDS } from '../core/workspace.js';
import { lockStateFile, pidNamespace, realStatePath, unlockQuietly } from '../store/lock.js';
import { LOCK_LOST } from '../store/writer.js';
import { DEFAULT_STATE_FILE, adminFileFor } from '../protocol/admin-file.js';
import { announcedHolder, removeAdminFile, writeAdminFile } from './admin-file.js';
import { ADMIN_PREFIX } from '../protocol/admin-api.js';
import { buildApiApp } from './api-app.js';
import { buildAuthApp } from './auth-app.js';
import { BrowserSessions } from './browser-session.js';
import { isLoopbackBind } from './host-guard.js';
import { alsoOnIpv6Loopback, closeServer } from './ipv6-loopback.js';
import { QuietMoments } from './quiet-moments.js';
import { ConnectionBudget } from './http-transport.js';
import { PrecompiledSchemas, type SchemaCompilers } from './route-schemas.js';
import { Snapshots } from './snapshots.js';
import { WarmUpRequests } from './warm-up-request.js';
import type { RequestObserver } from './observer.js';
import { parseProfile, pinsOf, profileSummary, type VariantProfile } from '../core/variant-profile.js';
import type { LoadedProfile } from '../store/profile-file.js';

export { DEFAULT_STATE_FILE };
export const DEFAULT_PORT = 4100;
export const DEFAULT_AUTH_PORT = 4101;
/** The default interface; bound to it, both servers listen on ::1 too (STANDARDS "Loopback names"). */
export const DEFAULT_HOST = '127.0.0.1';
const STOP_GRACE_MS = 10_000;
const SETTLE_EVERY_MS = 250;
/** How long the servers must have been idle before a piece of the loading after the ready line runs. */
const QUIET_MS = 50;

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

/** A profile option as a loaded profile; a file is read only when one is given (the loader is not on every start's path). */
async function loadedProfile(option: string | VariantProfile): Promise<LoadedProfile | (Omit<LoadedProfile, 'file'> & { file: null })> {
  if (typeof option === 'string') return (await import('../store/profile-file.js')).loadProfile(option);
  let profile: VariantProfile;
  try {
    profile = parseProfile(option);
  } catch (e) {
    throw new TypeError(`profile: ${(e as Error).message}`, { cause: e });
  }
  return { name: profile.server, file: null, profile };
}

export interface EmulatorOptions {
  /** `{base_url}` port; 0 picks a free one. Default 4100. */
  port?: number;
  /** `{auth_url}` port; 0 picks a free one. Default 4101. */
  authPort?: number;
  /** Interface to bind. Default 127.0.0.1, and then ::1 too at the same ports (where the machine has it). */
  host?: string;
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

/** The host part of the service URLs: a wildcard bind is announced as 127.0.0.1, IPv6 literals get brackets. */
function urlHostFor(host: string): string {
  if (host === '0.0.0.0' || host === '::') return '127.0.0.1';
  return host.includes(':') ? `[${host}]` : host;
}

/** The real-time wait the core is given for the ask latency and timeout; cancelling clears its timer. */
const realTimeSleep: Sleep = (ms) => {
  let timer: NodeJS.Timeout | undefined;
  const done = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
  });
  return { done, cancel: () => clearTimeout(timer) };
};

/** The emulated service: two loopback origins over one core. `agent-access serve` wraps it. */
export class Emulator {
  readonly core: Core;
  /** The resource server behind the REST allowlist and the agent tools (metering, ask, research, training, search). */
  readonly resources: ResourceService;
  /** The agent plane's write actions (spec 2.7 workspace.write, 4.5). */
  readonly plane: AgentPlane;
  /** Faults on purpose (emulator control). */
  readonly faults: Faults;
  /** Save, restore and reset the whole state (also on the admin API). */
  readonly snapshots: Snapshots;
  readonly statePath: string | null;
  readonly adminToken: string;
  readonly adminFile: string | null;
  /** The variation mode it runs in (its seed), or false. */
  readonly varyUnspecified: VaryUnspecified | false;
  /** The profile it answers with (`serve --profile`), or null. */
  readonly profile: ProfileInUse | null;
  readonly #api: FastifyInstance;
  readonly #auth: FastifyInstance;
  /** The servers' second listeners, on ::1 (bound to the default 127.0.0.1). */
  #ipv6: Server[] = [];
  readonly #release: (() => Promise<void>) | null;
  readonly #lifecycle: { stopping: boolean };
  #pruneTimer: NodeJS.Timeout | undefined;
  #settleTimer: NodeJS.Timeout | undefined;
  #stopping: Promise<void> | undefined;
  #loaded: Promise<void> = Promise.resolve();
  /** Another process took the state file's lock over: this one writes nothing more, its admin file included. */
  #lockLost = false;

  /** @deprecated The old name of `resources`. */
  get allowlist(): ResourceService {
    return this.resources;
  }

  private constructor(
    core: Core,
    resources: ResourceService,
    plane: AgentPlane,
    faults: Faults,
    snapshots: Snapshots,
    api: FastifyInstance,
    auth: FastifyInstance,
    statePath: string | null,
    adminToken: string,
    release: (() => Promise<void>) | null,
    lifecycle: { stopping: boolean },
    varyUnspecified: VaryUnspecified | false,
    profile: ProfileInUse | null,
  ) {
    this.varyUnspecified = varyUnspecified;
    this.profile = profile;
    this.resources = resources;
    this.plane = plane;
    this.faults = faults;
    this.snapshots = snapshots;
    this.#lifecycle = lifecycle;
    this.core = core;
    this.#api = api;
    this.#auth = auth;
    this.statePath = statePath;
    this.adminToken = adminToken;
    this.adminFile = statePath ? adminFileFor(statePath) : null;
    this.#release = release;
  }

  get baseUrl(): string {
    return this.core.urls.baseUrl;
  }
  get authUrl(): string {
    return this.core.urls.authUrl;
  }
  get issuer(): string {
    return this.core.issuer;
  }
  get adminUrl(): string {
    return `${this.baseUrl}${ADMIN_PREFIX}`;
  }

  /**
   * Resolves once what loads after the ready line has loaded: the search index, in the quiet moments after the start
   * (the MCP SDK loads with the first /mcp request). Nothing needs to wait for it (requests that need the index build it
   * or wait for it by themselves); it is there for measurements and tests.
   */
  loaded(): Promise<void> {
    return this.#loaded;
  }

  static async start(options: EmulatorOptions = {}): Promise<Emulator> {
    const host = options.host ?? DEFAULT_HOST;
    const varyUnspecified = options.varyUnspecified ? { seed: checkSeed(options.varyUnspecified.seed) } : false;
    // Read before anything else, so a bad profile stops the start before a lock is taken or a port is bound.
    const loaded = options.profile === undefined ? null : await loadedProfile(options.profile);
    const statePath = options.inMemory ? null : await realStatePath(options.state ?? DEFAULT_STATE_FILE);
    const onError: NonNullable<EmulatorOptions['onError']> =
      options.onError ?? ((error, context) => process.emitWarning(`agent-access (${context}): ${error.stack ?? error.message}`));
    const onNotice: NonNullable<EmulatorOptions['onNotice']> = options.onNotice ?? ((line) => process.emitWarning(`agent-access: ${line}`));
    let emulator: Emulator | undefined;
    let persistence: StatePersistence | undefined;
    // An object, not a variable: the lock's callback sets it, which control-flow narrowing cannot see.
    const lock: { lost: Error | null } = { lost: null };
    // One writer per state file: taken before reading, held until stop. Fixtures load meanwhile.
    const [fixtures, release] = await Promise.all([
      loadFixtures(options.fixtures),
      statePath
        ? lockStateFile(statePath, {
            holder: () => announcedHolder(adminFileFor(statePath)),
            onNotice,
            // Another process took the file over: stop at once rather than be a second writer.
            onCompromised: (error) => {
              const lost = new Error(`lost the lock on ${statePath}; stopping so that only one process writes it (${error.message})`);
              lock.lost = lost;
              if (emulator) emulator.#lockLost = true;
              onError(lost, 'lock');
              // Not one more write: stopping lets requests in flight finish, and their saves must not land.
              if (persistence instanceof FilePersistence) persistence.abandon(lost);
              void emulator?.stop();
            },
          })
        : null,
    ]).catch(async (e: unknown) => {
      if (statePath && !(e instanceof StateLockedError)) await unlockQuietly(statePath);
      throw e;
    });
    let apps: FastifyInstance[] = [];
    let ipv6: Server[] = [];
    try {
      persistence = statePath
        ? new FilePersistence(statePath, {
            journalLimit: options.journalLimit,
            onNotice,
            lockDir: `${statePath}.lock`,
            // A compaction's new inode is locked as the one before was: a hard link to it cannot be served either.
            onStateFile: () => void release?.identify(),
            // Its files were removed under it, or its lock is not its own any more: it acknowledges nothing more (the
            // persistence refuses), and stops.
            onLost: (lost) => {
              const lockLost = (lost as NodeJS.ErrnoException).code === LOCK_LOST;
              if (lockLost) {
                lock.lost ??= lost;
                // The admin file may be the new holder's already.
                if (emulator) emulator.#lockLost = true;
              }
              onError(lost, lockLost ? 'lock' : 'state');
              void emulator?.stop();
            },
          })
        : new MemoryPersistence();
      const timings: JobTimings = { ...QUICK_TIMINGS, ...options.timings };
      // The schema validator loads only when a scenario is given: it is not on every start's path.
      const scenario = options.scenario ? await (await import('../store/scenario.js')).loadScenario(options.scenario, fixtures) : undefined;
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
      await release?.identify();
      for (const { clientId, policy } of options.consent ?? []) setConsentPolicy(core, clientId, policy);
      const faults = new Faults(core);
      for (const spec of options.faults ?? []) faults.arm(spec);
      const adminToken = randomToken(32);
      const ports: { api?: number; auth?: number } = {};
      const checkHost = isLoopbackBind(host);
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
        varyUnspecified,
        profile: loaded ? { name: loaded.name, pins: pinsOf(loaded.profile) } : null,
      });
      const plane = new AgentPlane(core, resources, fixtures.workspace);
      // After a restore, what lives in memory beside the state follows it: the workspace, search, rate limits.
      let afterRestore: (() => void) | undefined;
      const snapshots = new Snapshots(
        core,
        statePath ? new FileSnapshotStore(snapshotDirFor(statePath)) : new MemorySnapshotStore(),
        () => {
          rebuildWorkspace();
          resources.reload();
          afterRestore?.();
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
        checkHost,
        bindHost: host,
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
      apps = [api, auth];
      emulator = new Emulator(
        core,
        resources,
        plane,
        faults,
        snapshots,
        api,
        auth,
        statePath,
        adminToken,
        release,
        lifecycle,
        varyUnspecified,
        loaded && { name: loaded.name, file: loaded.file, server: loaded.profile.server, ...profileSummary(loaded.profile) },
      );
      // One bound over every listener's connections, counted from the first.
      const connections = new ConnectionBudget(options.maxConnections);
      for (const server of [api.server, auth.server]) connections.watch(server);
      await Promise.all([
        api.listen({ port: options.port ?? DEFAULT_PORT, host }),
        auth.listen({ port: options.authPort ?? DEFAULT_AUTH_PORT, host }),
      ]);
      ports.api = (api.server.address() as AddressInfo).port;
      ports.auth = (auth.server.address() as AddressInfo).port;
      const urlHost = urlHostFor(host);
      core.setUrls({ baseUrl: `http://${urlHost}:${ports.api}`, authUrl: `http://${urlHost}:${ports.auth}` });
      // A client given http://localhost:P may reach ::1 first, and http://[::1]:P only there: the same apps listen there.
      // Only after setUrls: a request is served once its port is known, so nothing may be awaited between the two.
      if (host === DEFAULT_HOST) {
        const listening = await alsoOnIpv6Loopback([
          { app: api, port: ports.api },
          { app: auth, port: ports.auth },
        ]);
        ipv6 = emulator.#ipv6 = listening.servers;
        for (const server of ipv6) connections.watch(server);
        if (listening.notice) onNotice(listening.notice);
      }
      // Watched before the warm-up, whose request then runs the watcher's code as a client's first would.
      const quiet = new QuietMoments();
      for (const server of [api.server, auth.server, ...ipv6]) quiet.watch(server);
      // Ready means ready: a client's first request finds the code every request runs compiled.
      await warmUp.get(core.urls.baseUrl, AS_METADATA_PATH);
      if (emulator.adminFile) {
        const { adminFile, adminUrl, baseUrl, authUrl } = emulator;
        const announce = (keyId: string) =>
          writeAdminFile(adminFile, {
            admin_url: adminUrl,
            admin_token: adminToken,
            base_url: baseUrl,
            auth_url: authUrl,
            pid: process.pid,
            pid_namespace: pidNamespace(),
            key_id: keyId,
          });
        let announced = core.signer.kid;
        await announce(announced);
        // A snapshot of another state signs with another key: the file keeps telling this emulator apart truly.
        afterRestore = () => {
          if (core.signer.kid === announced) return;
          announced = core.signer.kid;
          void announce(announced).catch((e: Error) => onError(e, 'admin file'));
        };
      }
      emulator.#pruneTimer = setInterval(() => {
        if (core.prune()) void core.commit().catch((e: Error) => onError(e, 'prune'));
      }, 60_000).unref();
      // Research jobs and training steps move on the clock; the ticker publishes each step as it happens.
      emulator.#settleTimer = setInterval(
        () => void Promise.all([resources.settle(), faults.runDue()]).catch((e: Error) => onError(e, 'settle')),
        SETTLE_EVERY_MS,
      ).unref();
      // Route schemas that had to be compiled at start mean the build is out of date: said once, after listening.
      const schemaNotice = schemaCompilers.notice?.();
      if (schemaNotice) onNotice(schemaNotice);
      // The search index, which only some requests need (ask, research and the MCP tools), is built after the ready
      // line, a piece at a time and in quiet moments, so that the others are served at full speed meanwhile; a request
      // that needs it builds it at once, or waits for it. (The MCP SDK loads with the first /mcp request: server/mcp.ts.)
      emulator.#loaded = quiet
        .moment(QUIET_MS)
        .then(async () => {
          // An emulator stopped before its quiet moment builds nothing more (tests start and stop many).
          if (!lifecycle.stopping) await resources.search.warmUp();
        })
        .catch((e: Error) => onError(e, 'warm-up'));
      // Lost while starting: the stop it asked for may have come before there was anything to stop.
      if (lock.lost && statePath) {
        emulator.#lockLost = true;
        await emulator.stop();
        throw new StateFileError(statePath, lock.lost.message);
      }
      return emulator;
    } catch (e) {
      await Promise.allSettled([...apps.map((app) => app.close()), ...ipv6.map(closeServer)]);
      // Its writer thread and open files go too (a test process may try again and again); before the lock is let go.
      await persistence?.close().catch(() => undefined);
      await release?.().catch(() => undefined);
      throw e;
    }
  }

  /** Stops accepting, lets in-flight requests finish, flushes the state, releases the file. */
  stop(): Promise<void> {
    return (this.#stopping ??= (async () => {
      clearInterval(this.#pruneTimer);
      clearInterval(this.#settleTimer);
      this.#lifecycle.stopping = true;
      // In-flight requests finish (their responses close the connection); a client that holds one open longer is cut off.
      const cutOff = setTimeout(() => {
        this.#api.server.closeAllConnections();
        this.#auth.server.closeAllConnections();
        for (const server of this.#ipv6) server.closeAllConnections();
      }, STOP_GRACE_MS).unref();
      await Promise.all([this.#api.close(), this.#auth.close(), ...this.#ipv6.map(closeServer)]);
      clearTimeout(cutOff);
      await this.core.persistence.close();
      // After a takeover the admin file may already be the new holder's.
      if (this.adminFile && !this.#lockLost) await removeAdminFile(this.adminFile);
      // A lock that was taken over is no longer ours to release.
      await this.#release?.().catch(() => undefined);
    })());
  }
}
