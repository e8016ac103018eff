import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import type { AgentPlane } from '../core/resources/agent-plane.js';
import type { Core } from '../core/core.js';
import type { Faults } from '../core/emulation/faults.js';
import type { ResourceService } from '../core/resources/resource-service.js';
import { parseProfile, profileSummary, type VariantProfile } from '../core/emulation/variant-profile.js';
import { checkSeed, type VaryUnspecified } from '../core/emulation/variation.js';
import { loadFixtures } from '../loaders/fixtures.js';
import { realStatePath } from '../store/lock.js';
import type { LoadedProfile } from '../loaders/profile.js';
import { ADMIN_PREFIX } from '../protocol/admin-api.js';
import { DEFAULT_STATE_FILE, adminFileFor } from '../protocol/admin-file.js';
import type { EmulatorOptions, ProfileInUse } from './emulator-options.js';
import { DEFAULT_HOST, Lifecycle } from './lifecycle.js';
import type { Snapshots } from './snapshots.js';
import { wire, type Wired } from './wiring.js';

export { DEFAULT_STATE_FILE };
export type { EmulatorOptions, ProfileInUse } from './emulator-options.js';
export { DEFAULT_AUTH_PORT, DEFAULT_HOST, DEFAULT_PORT } from './lifecycle.js';

/** A profile option as a loaded profile; a file is read only when one is given (the loader is not on every start's path). */
async function loadedProfile(option: string | VariantProfile): Promise<LoadedProfile | (Omit<LoadedProfile, 'file'> & { file: null })> {
  if (typeof option === 'string') return (await import('../loaders/profile.js')).loadProfile(option);
  let profile: VariantProfile;
  try {
    profile = parseProfile(option);
  } catch (e) {
    throw new TypeError(`profile: ${(e as Error).message}`, { cause: e });
  }
  return { name: profile.server, file: null, profile };
}

/** One request for `Emulator.inject`: an absolute URL on one of the emulator's origins. */
export interface InjectRequest {
  url: string;
  method?: string;
  headers?: Record<string, string>;
  body?: string;
}
export type InjectResponse = LightMyRequestResponse;

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
  readonly #lifecycle: Lifecycle;
  readonly #apps: { api: FastifyInstance; auth: FastifyInstance };
  #loaded: Promise<void> = Promise.resolve();

  /** @deprecated The old name of `resources`. */
  get allowlist(): ResourceService {
    return this.resources;
  }

  private constructor(
    wired: Wired,
    lifecycle: Lifecycle,
    statePath: string | null,
    varyUnspecified: VaryUnspecified | false,
    profile: ProfileInUse | null,
  ) {
    this.core = wired.core;
    this.resources = wired.resources;
    this.plane = wired.plane;
    this.faults = wired.faults;
    this.snapshots = wired.snapshots;
    this.adminToken = wired.adminToken;
    this.#lifecycle = lifecycle;
    this.#apps = { api: wired.api, auth: wired.auth };
    this.statePath = statePath;
    this.adminFile = statePath ? adminFileFor(statePath) : null;
    this.varyUnspecified = varyUnspecified;
    this.profile = profile;
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
   * or wait for it by themselves); it is there for measurements and tests. Without listeners (`listen: false`) nothing
   * loads after the start: it resolves at once, and the first request that needs the index builds it.
   */
  loaded(): Promise<void> {
    return this.#loaded;
  }

  /**
   * Starts an emulator: settles what the options ask for (a profile and the state file are read first, so a bad one
   * stops the start before a lock is taken or a port is bound), takes the state file, wires the service (wiring.ts)
   * and runs its lifecycle (lifecycle.ts): listen, warm up, announce, the timers, then what loads after the ready line.
   */
  static async start(options: EmulatorOptions = {}): Promise<Emulator> {
    if (options.listen === false && (!options.port || !options.authPort))
      throw new TypeError('listen: false needs port and authPort, for the URLs the service names');
    const host = options.host ?? DEFAULT_HOST;
    const varyUnspecified = options.varyUnspecified ? { seed: checkSeed(options.varyUnspecified.seed) } : false;
    const loaded = options.profile === undefined ? null : await loadedProfile(options.profile);
    const statePath = options.inMemory ? null : await realStatePath(options.state ?? DEFAULT_STATE_FILE);
    const onError: NonNullable<EmulatorOptions['onError']> =
      options.onError ?? ((error, context) => process.emitWarning(`agent-access (${context}): ${error.stack ?? error.message}`));
    const onNotice: NonNullable<EmulatorOptions['onNotice']> = options.onNotice ?? ((line) => process.emitWarning(`agent-access: ${line}`));
    const life = new Lifecycle(statePath, onError, onNotice);
    const fixtures = await life.lock(loadFixtures(options.fixtures));
    try {
      const persistence = life.openPersistence(options);
      const wired = await wire({
        options,
        host,
        persistence,
        statePath,
        fixtures,
        varyUnspecified,
        profile: loaded,
        onError,
        identify: () => life.identify(),
      });
      life.attach(wired);
      const emulator = new Emulator(
        wired,
        life,
        statePath,
        varyUnspecified,
        loaded && { name: loaded.name, file: loaded.file, server: loaded.profile.server, ...profileSummary(loaded.profile) },
      );
      const listening = options.listen !== false;
      const quiet = listening ? await life.listen(options, host) : await life.withoutListening(options, host);
      // Other command lines find a running emulator by its admin file: one without listeners cannot be reached.
      if (listening) await life.announce(wired);
      life.startTimers(wired);
      // Route schemas that had to be compiled at start mean the build is out of date: said once, after listening.
      const schemaNotice = wired.schemaCompilers.notice?.();
      if (schemaNotice) onNotice(schemaNotice);
      if (quiet) emulator.#loaded = life.loadAfterReady(wired, quiet);
      await life.checkStillHeld();
      return emulator;
    } catch (e) {
      await life.abort();
      throw e;
    }
  }

  /**
   * Serves one request without a socket (fastify's inject), by the app whose origin its URL names: `{base_url}` or
   * `{auth_url}`. The Host header is the URL's unless given, the peer is 127.0.0.1. For tests of the HTTP rules in one
   * process (`listen: false`); what needs a connection (a `drop_response` fault closes it unanswered) needs a listener.
   */
  inject(request: InjectRequest): Promise<InjectResponse> {
    const url = new URL(request.url);
    const app =
      url.origin === new URL(this.authUrl).origin ? this.#apps.auth : url.origin === new URL(this.baseUrl).origin ? this.#apps.api : null;
    if (!app) return Promise.reject(new TypeError(`${url.origin} is neither ${this.baseUrl} nor ${this.authUrl}`));
    return app.inject({
      method: (request.method ?? 'GET') as 'GET',
      url: `${url.pathname}${url.search}`,
      headers: { host: url.host, ...request.headers },
      payload: request.body,
    });
  }

  /** Stops accepting, lets in-flight requests finish, flushes the state, releases the file. */
  stop(): Promise<void> {
    return this.#lifecycle.stop();
  }
}
