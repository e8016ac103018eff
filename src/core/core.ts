import { AccessTokenSigner } from './oauth/access-token.js';
import type { ChargeEntry } from './state/charges.js';
import type { Clock } from './state/clock.js';
import { Arrivals } from './emulation/arrivals.js';
import { ConsentPolicies } from './emulation/consent-policy.js';
import { DEFAULT_LIFETIMES, type CoreContext, type Lifetimes } from './context.js';
import { StateFileError } from './state/errors.js';
import { EventBus } from './state/events.js';
import { Findings } from './emulation/findings.js';
import { seedGrant, type GrantSeed } from './oauth/grants-admin.js';
import { ConsentScreens } from './oauth/consent-screens.js';
import type { JobTimings } from './resources/jobs.js';
import { generateSigningKey } from './oauth/keys.js';
import { issuerOf, resourceOf, type ServiceUrls } from './oauth/metadata.js';
import { stateText, type StatePersistence, type StateExport } from './state/persistence.js';
import { defaultPerson, type Person } from './state/persons.js';
import { Repository, type ReadonlyState } from './state/repository.js';
import { DEFAULT_RETENTION, applyRetention, type Retention } from './oauth/retention.js';
import { RegistrationGate, type RegistrationLimits } from './oauth/registration-gate.js';
import { applyScenario, type LoadedScenario } from './emulation/scenario.js';
import { adoptLedger, emptyState, parseState, type SigningKey, type State, type TokenFamily } from './state/state.js';

/** Fixtures (src/loaders/fixtures.ts) name seed grants by the type the core's options take. */
export type { GrantSeed };

export interface CoreOptions {
  clock: Clock;
  persistence: StatePersistence;
  persons: Person[];
  lifetimes?: Partial<Lifetimes>;
  /** How long finished records are kept (default DEFAULT_RETENTION). */
  retention?: Partial<Retention>;
  /** The bounds of open registration (default DEFAULT_REGISTRATION_LIMITS). */
  registration?: Partial<RegistrationLimits>;
  /** Grants created when the state is new (their resource reads `{base_url}/mcp` in the file). */
  seedGrants?: GrantSeed[];
  /**
   * A scenario loaded into the state when it is new, after the seed grants. An existing state must have been
   * created from the same scenario (same sha256), or opening fails and leaves it untouched.
   */
  scenario?: LoadedScenario & { timings: JobTimings };
}

/**
 * The authorization server's domain core, a small facade: it owns what the rules share (clock, event bus, persons,
 * lifetimes, retention, the repository and its persistence, the signing key, the service URLs, the family-by-handle
 * index, the open consent screens and the consent policies) and opens, commits, exports and restores the state.
 * The core's modules take it as a `CoreContext` (context.ts), never as a `Core`: the OAuth rules, one module each
 * (registration.ts, consent.ts, token-endpoint.ts with grants/, token-family.ts, issue-tokens.ts, resource-guard.ts,
 * revocation.ts, grants-admin.ts, scenario.ts), and the services (metering, faults, the agent plane, findings). What
 * only the composition root and the adapters use is here alone: opening, exporting and restoring the state,
 * retention, warm-up, setting the service URLs, the findings. Adapters (HTTP, CLI, store) call it; it imports none
 * of them.
 */
export class Core implements CoreContext {
  readonly clock: Clock;
  readonly events: EventBus;
  readonly persons: readonly Person[];
  readonly lifetimes: Lifetimes;
  readonly retention: Retention;
  readonly persistence: StatePersistence;
  /** Whether this open created the state (it did not exist): seeds and scenario were applied. */
  readonly created: boolean;
  /** The one way the state changes; `state` is for reading. */
  readonly repo: Repository;
  #signer: AccessTokenSigner;
  #urls: ServiceUrls | undefined;
  #familyByHandle = new Map<string, string>();
  /** Signs the consent screens and remembers which were answered (a restart asks again). */
  readonly consentScreens = new ConsentScreens();
  /** Who answers the consent screen (emulator control): the person by default. */
  readonly consentPolicies = new ConsentPolicies();
  /** The order requests arrived in, which the transports number (arrivals.ts). */
  readonly arrivals = new Arrivals();
  /** What the core's events show of each client's habits (client findings); it only watches. */
  readonly findings: Findings;
  readonly registrations: RegistrationGate;

  private constructor(options: CoreOptions, state: State, created: boolean, newKey: SigningKey | null) {
    this.clock = options.clock;
    this.created = created;
    this.events = new EventBus(() => this.clock.now());
    this.persons = options.persons;
    this.lifetimes = { ...DEFAULT_LIFETIMES, ...options.lifetimes };
    this.retention = { ...DEFAULT_RETENTION, ...options.retention };
    this.persistence = options.persistence;
    this.repo = new Repository(state);
    if (newKey) this.repo.addSigningKey(newKey);
    this.#signer = new AccessTokenSigner(this.state.keys[0]!);
    this.#reindex();
    this.findings = new Findings(this);
    this.registrations = new RegistrationGate(this.clock, this.repo, this.retention, options.registration);
  }

  get state(): ReadonlyState {
    return this.repo.state;
  }

  get signer(): AccessTokenSigner {
    return this.#signer;
  }

  /** Loads the state (or creates it with a fresh signing key, the seed grants and the scenario) and makes it durable. */
  static async open(options: CoreOptions): Promise<Core> {
    defaultPerson(options.persons);
    let state = await options.persistence.load();
    const fresh = state === null;
    if (state && options.scenario && state.scenario?.sha256 !== options.scenario.sha256)
      throw scenarioMismatch(options.persistence.location ?? '(in memory)', state, options.scenario, options.persistence);
    state ??= emptyState();
    const newKey = state.keys.length === 0 ? await generateSigningKey(options.clock.now()) : null;
    const core = new Core(options, state, fresh, newKey);
    if (fresh) {
      for (const seed of options.seedGrants ?? []) seedGrant(core, seed);
      if (options.scenario) applyScenario(core, options.scenario, options.scenario.timings);
    }
    // A new state is made durable; an existing one hands persistence the repository it commits from.
    await core.commit();
    return core;
  }

  // ---- plumbing -------------------------------------------------------------------------------

  /** Makes every change made so far durable. Concurrent calls share one write. */
  commit(): Promise<void> {
    return this.persistence.commit(this.repo);
  }

  /** Spec 1: one line of the charge ledger, and the totals; durable with the next commit. */
  recordCharge(entry: Omit<ChargeEntry, 'seq'>, bodySha256?: string): ChargeEntry {
    const line = this.repo.recordCharge(entry);
    this.events.emit('charge.recorded', bodySha256 === undefined ? line : { ...line, body_sha256: bodySha256 });
    return line;
  }

  /**
   * The committed state and ledger exactly as stored (the export), after committing every change made so far.
   * The read is asked for in the same turn as the commit, so it is that commit's state and ledger, or a later pair.
   */
  async exportState(): Promise<StateExport> {
    const committed = this.commit();
    const exported = this.persistence.exportState(this.repo);
    const [result] = await Promise.all([exported, committed]);
    return result;
  }

  /**
   * Makes `exported` (an export, a snapshot's among them) the stored state and ledger byte for byte, and the core's state. Changes not yet
   * committed and open consent screens are dropped; `swap` runs with the new state in place, before anything
   * else can be written (the caller brings its own in-memory views along). Throws StateFileError, before
   * anything changed, if `exported.state` is not a state file (`label` names where it came from).
   */
  async importState(exported: StateExport, label: string, swap: () => void = () => undefined): Promise<void> {
    const advice = this.persistence.resetAdvice(label);
    const parsed = parseState(exported.state, label, advice);
    // Saved before the charges moved into the state: stored with the charges it takes from the ledger saved with it.
    const legacy = (parsed as Partial<State>).charge_ledger === undefined;
    const state = adoptLedger(parsed, exported.ledger, label, `the charge ledger saved with ${label}`, advice);
    if (legacy) exported = { ...exported, state: stateText(state) };
    if (state.keys.length === 0) throw new StateFileError(label, `${label} holds no signing key; it is not a state this emulator wrote`);
    await this.persistence.importState(exported, state, () => {
      this.consentScreens.reset();
      this.registrations.clear();
      this.repo.replace(state);
      this.#signer = new AccessTokenSigner(this.state.keys[0]!);
      this.#reindex();
      swap();
    });
  }

  #reindex(): void {
    this.#familyByHandle.clear();
    for (const family of Object.values(this.state.families)) this.#familyByHandle.set(family.handle_hash, family.id);
  }

  // ---- service URLs, known once the emulator listens ------------------------------------------

  setUrls(urls: ServiceUrls): void {
    this.#urls = { baseUrl: urls.baseUrl.replace(/\/+$/, ''), authUrl: urls.authUrl.replace(/\/+$/, '') };
  }

  get urls(): ServiceUrls {
    if (!this.#urls) throw new Error('service URLs are not known yet (the emulator is not listening)');
    return this.#urls;
  }

  get issuer(): string {
    return issuerOf(this.urls);
  }

  get resource(): string {
    return resourceOf(this.urls);
  }

  // ---- the family-by-handle index (a refresh token names its family: token-family.ts) ---------

  familyByHandle(handleHash: string): TokenFamily | undefined {
    const id = this.#familyByHandle.get(handleHash);
    return id ? this.state.families[id] : undefined;
  }

  indexFamily(family: TokenFamily): void {
    if (this.#familyByHandle.has(family.handle_hash)) throw new Error('two token families would share one refresh-token handle');
    this.#familyByHandle.set(family.handle_hash, family.id);
  }

  // ---- signing key and persons ----------------------------------------------------------------

  warmUp(): Promise<void> {
    return this.#signer.warmUp();
  }

  person(id: string): Person | undefined {
    return this.persons.find((p) => p.id === id);
  }

  get defaultPerson(): Person {
    return defaultPerson(this.persons);
  }

  // ---- housekeeping ---------------------------------------------------------------------------

  /** Lets go of what retention no longer keeps (src/core/retention.ts); true when anything went (the caller commits). */
  prune(): boolean {
    const { removed, families } = applyRetention(this.repo, this.clock.now(), this.retention);
    for (const family of families) this.#familyByHandle.delete(family.handle_hash);
    this.consentScreens.prune(this.clock.now());
    return removed > 0;
  }
}

/** An existing state that was not created from this scenario: the state is kept, the server does not start. */
function scenarioMismatch(file: string, state: State, scenario: LoadedScenario, persistence: StatePersistence): StateFileError {
  const made = state.scenario
    ? `it was created from ${
        state.scenario.file === scenario.file ? 'another version of that file' : state.scenario.file
      } (sha256 ${state.scenario.sha256.slice(0, 12)}…)`
    : 'it was created without a scenario';
  return new StateFileError(
    file,
    `state file ${file} was not created from scenario ${scenario.file} (sha256 ${scenario.sha256.slice(0, 12)}…): ${made}. A scenario ` +
      `is loaded into a new state only. ` +
      `Nothing was changed. To start from the scenario, move the state file away with its journal and charge ` +
      `ledger (${persistence.moveAwayCommand(file)}) or start with --state OTHER_FILE or --in-memory; to go on with this state, start without --scenario.`,
  );
}
