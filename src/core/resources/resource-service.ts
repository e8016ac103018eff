import { composeAnswer, type AskAnswer } from './ask.js';
import { DEFAULT_PRICES, type Prices } from '../state/charges.js';
import type { CoreContext } from '../context.js';
import type { AccessContext } from '../oauth/resource-guard.js';
import { randomToken } from '../state/crypto.js';
import { Metering, requestFault, type Answer, type Charged } from './metering.js';
import type { RateLimitConfig } from '../state/rate-limit.js';
import { ProblemError } from '../state/errors.js';
import { SearchIndex } from './search.js';
import type { FaultPoint } from './fault-point.js';
import { idFor } from './ids.js';
import type { KnowledgeDocument, Workspace } from './workspace.js';
import { QUICK_TIMINGS, type JobTimings } from './jobs.js';
import { Research, checkQuestion, type ResearchAccepted } from './research.js';
import { Training, asKnowledge, type TrainingAccepted, type TrainingLink } from './training.js';
import { describeVariant, varyAskAnswer, type ResearchJobView, type TrainingDocumentView, type VariantSource } from './variants.js';

/**
 * Waits `ms` of real time (the ask latency and timeout of spec 4.4 rule 2 are real waits, whatever the clock). Given
 * by the adapter: the core reads time only through its Clock. `done` settles when the time has passed; once
 * `cancel` is called it need never settle. (A plain handle, not an AbortSignal: every ask cancels its timeout, and
 * an abort builds a DOMException with a stack each time.)
 */
export type Sleep = (ms: number) => { done: Promise<void>; cancel: () => void };

export interface ResourceServiceOptions {
  workspace: Workspace;
  knowledge: KnowledgeDocument[];
  /** Real-time waits for the ask latency and timeout. */
  sleep: Sleep;
  prices?: Partial<Prices>;
  /** Per grant; default 60 requests a minute. */
  rateLimit?: RateLimitConfig;
  /** POST /chat/ask is abandoned after this long (real time: a request waits in real time). Default 30 s. */
  askTimeoutMs?: number;
  /** Simulated thinking time of an ask, real time. Default 0. */
  askLatencyMs?: number;
  /** How long research jobs and training steps take on the emulator clock. */
  timings?: Partial<JobTimings>;
  /** Faults on purpose (emulator control): rate limits, ask timeouts, failing research. */
  faults?: FaultPoint;
  /**
   * The variant of each new answer, job and document (emulation/variation.ts): `serve --vary-unspecified` varies what
   * the spec leaves open, `serve --profile` answers dimensions the way a real server was seen to. None by default.
   */
  variation?: VariantSource | null;
}

/**
 * The resource server behind the REST allowlist and the agent tools (spec 4.4, 4.5): the metered call they share
 * (`meter`: rate limits per grant, idempotency per client and route, charges), and the operations (ask, research
 * jobs, training documents), which answer domain objects or throw a ProblemError. Jobs move on the clock (`settle`).
 */
export class ResourceService {
  readonly search: SearchIndex;
  readonly knowledge: KnowledgeDocument[];
  readonly prices: Prices;
  readonly meter: Metering;
  readonly research: Research;
  readonly training: Training;
  readonly askTimeoutMs: number;
  readonly askLatencyMs: number;
  readonly timings: JobTimings;
  readonly faults: FaultPoint | undefined;
  /** Hands out the variants of new answers, jobs and documents; null unless --vary-unspecified or --profile. */
  readonly variation: VariantSource | null;
  readonly #sleep: Sleep;
  readonly #fileNames = new Map<string, string>();
  #settling: { promise: Promise<boolean> } | null = null;
  /** The clock time the newest scheduled settle run covers at least. */
  #settlingTo = -Infinity;

  constructor(
    private readonly core: CoreContext,
    options: ResourceServiceOptions,
  ) {
    this.knowledge = options.knowledge;
    this.search = new SearchIndex(options.workspace, this.#findable());
    this.timings = { ...QUICK_TIMINGS, ...options.timings };
    this.prices = { ...DEFAULT_PRICES, ...options.prices };
    this.meter = new Metering(core, options.rateLimit ?? { limit: 60, windowMs: 60_000 }, options.faults);
    this.askTimeoutMs = options.askTimeoutMs ?? 30_000;
    this.askLatencyMs = options.askLatencyMs ?? 0;
    this.#sleep = options.sleep;
    this.faults = options.faults;
    this.variation = options.variation ?? null;
    this.research = new Research(
      core,
      { search: this.search, fileNames: this.#fileNames },
      { timings: this.timings, prices: this.prices, faults: this.faults, variation: this.variation },
    );
    this.training = new Training(core, {
      timings: this.timings,
      variation: this.variation,
      indexed: async (doc) => {
        this.#fileNames.set(doc.id, doc.file_name);
        await this.search.addKnowledge(asKnowledge(doc));
      },
    });
  }

  /**
   * The knowledge base as the state has it: the fixtures' documents, a scenario's shared ones, and training
   * documents once indexed (so those indexed before a restart are findable again at once).
   */
  #findable(): KnowledgeDocument[] {
    const trained = this.core.repo
      .values('training_documents')
      .filter((d) => d.processing_step === 'indexed')
      .map(asKnowledge);
    const docs = [...this.knowledge, ...this.core.repo.values('shared_knowledge'), ...trained];
    this.#fileNames.clear();
    for (const doc of docs) this.#fileNames.set(doc.id, doc.file_name);
    return docs;
  }

  /** The state was replaced (a snapshot restore): search starts over from it, and rate-limit windows are forgotten. */
  reload(): void {
    this.meter.limiter.clear();
    this.reindex();
  }

  /** Search finds what the state and workspace hold now (a failed commit's training documents were rolled back). */
  reindex(): void {
    this.search.rebuild(this.#findable());
    // Built now rather than by the first ask after the restore; a failure shows there again.
    void this.search.warmUp().catch(() => undefined);
  }

  /**
   * Spec 2.4, 4.4 rules 1–2: a German answer grounded in what search found; read-only; abandoned past the timeout
   * (real time, through the injected sleep). Charged as an ask.
   */
  async ask(access: AccessContext, question: string): Promise<Charged<AskAnswer>> {
    checkQuestion(question);
    const timedOut = () =>
      new ProblemError('ask_timeout', `the question was abandoned after ${this.askTimeoutMs} ms (ask timeout); nothing was charged`);
    if (requestFault(this.faults, 'ask_timeout', access, { method: 'POST', path: '/chat/ask', question })) throw timedOut();
    const answer = (async () => {
      if (this.askLatencyMs > 0) await this.#sleep(this.askLatencyMs).done;
      const resource = this.core.resource;
      return this.search.derive(`ask ${resource}`, question, { person: access.person_id, limit: 8 }, (hits, analyze) =>
        composeAnswer(question, hits, resource, analyze),
      );
    })();
    const timer = this.#sleep(this.askTimeoutMs);
    const timeout = timer.done.then(() => {
      throw timedOut();
    });
    try {
      const composed = await Promise.race([answer, timeout]);
      // Varied here, before idempotency stores it, so a replay sends the varied bytes again. An abandoned ask takes no variant.
      const variant = this.variation?.next('ask');
      const message_id = idFor(variant, 'msg', () => `msg_${randomToken(16)}`);
      const value: AskAnswer = { ...composed, message_id };
      if (!variant) return { value, charge: this.prices.ask };
      return { value: varyAskAnswer(value, variant), charge: this.prices.ask, variant: describeVariant(variant) };
    } finally {
      timer.cancel();
    }
  }

  // ---- research and training, read after the job clock moved them (research.ts, training.ts) --------------------

  startResearch(access: AccessContext, question: string): Promise<Charged<ResearchAccepted>> {
    return Promise.resolve(this.research.start(access, question));
  }

  async researchView(access: AccessContext, jobId: string): Promise<Answer<ResearchJobView>> {
    await this.settle();
    return this.research.view(access, jobId);
  }

  startTraining(access: AccessContext, fileName: string, content: string): Promise<Answer<TrainingAccepted>> {
    return Promise.resolve(this.training.start(access, fileName, content));
  }

  async trainingView(access: AccessContext, documentId: string): Promise<Answer<TrainingDocumentView>> {
    await this.settle();
    return this.training.view(access, documentId);
  }

  async trainingUrl(access: AccessContext, documentId: string): Promise<Answer<TrainingLink>> {
    await this.settle();
    return this.training.url(access, documentId);
  }

  /** A knowledge document as a person may open it: a fixture or a scenario's shared one, or a training document of that person. */
  documentFor(personId: string, id: string): KnowledgeDocument | undefined {
    const fixture = this.knowledge.find((d) => d.id === id) ?? this.core.repo.get('shared_knowledge', id);
    if (fixture) return fixture;
    const doc = this.core.repo.get('training_documents', id);
    return doc && doc.person_id === personId ? asKnowledge(doc) : undefined;
  }

  // ---- the job clock ---------------------------------------------------------------------------

  /**
   * Moves every training document, then every research job, to where the clock says it is (their settle steps), and
   * commits what moved: the job clock's use case. Called on every read of a job or document and by the emulator's
   * ticker; calls never overlap. Returns whether anything changed.
   */
  settle(): Promise<boolean> {
    // A run in progress settles to the time it started at; if the clock moved since (a manual advance), one more
    // run follows it, so that the caller sees everything up to now.
    const running = this.#settling;
    if (running && this.#settlingTo >= this.core.clock.now()) return running.promise;
    const previous = running ? running.promise.catch(() => false) : Promise.resolve(false);
    const run = { promise: previous.then(() => this.#settle()) };
    this.#settling = run;
    this.#settlingTo = this.core.clock.now();
    void run.promise
      .finally(() => {
        if (this.#settling === run) this.#settling = null;
      })
      .catch(() => undefined);
    return run.promise;
  }

  async #settle(): Promise<boolean> {
    const now = this.core.clock.now();
    // Training first: a research job finishing later on the clock reads what was indexed before it.
    const trained = await this.training.settle(now);
    const researched = await this.research.settle(now);
    if (trained || researched) await this.core.commit();
    return trained || researched;
  }
}
