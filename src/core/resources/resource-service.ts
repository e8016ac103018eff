import { composeAnswer, type AskAnswer } from './ask.js';
import { composeReport } from './compose.js';
import { DEFAULT_PRICES, type Prices } from '../state/charges.js';
import type { Core } from '../core.js';
import type { AccessContext } from '../oauth/resource-guard.js';
import { newId, randomBytesFor, randomToken } from '../state/crypto.js';
import { Metering, requestFault, type Answer, type Charged } from './metering.js';
import type { RateLimitConfig } from '../state/rate-limit.js';
import { ProblemError } from '../state/errors.js';
import { SearchIndex } from './search.js';
import type { Faults } from '../emulation/faults.js';
import { fileNameProblem } from '../state/inputs.js';
import { markdownTitle, type KnowledgeDocument, type Workspace } from './workspace.js';
import {
  QUICK_TIMINGS,
  TRAINING_STEPS,
  trainingStepAt,
  unreadable,
  type JobTimings,
  type ResearchJob,
  type TrainingDocument,
} from './jobs.js';
import {
  Variation,
  describeVariant,
  formatId,
  varyAskAnswer,
  varyResearchCreated,
  varyResearchJob,
  varyTrainingAccepted,
  varyTrainingDocument,
  varyTrainingUrl,
  type ResearchJobView,
  type TrainingDocumentView,
  type PinnedProfile,
  type VariantSelection,
  type VaryUnspecified,
} from '../emulation/variation.js';

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
  faults?: Faults;
  /** Vary what the spec leaves open (README "Varying what the spec leaves open"); off by default. */
  varyUnspecified?: VaryUnspecified | false;
  /** `serve --profile`: dimensions answered the way a real server was seen to answer; the rest as without it. */
  profile?: PinnedProfile | null;
}

/** Spec 2.6: training content is limited (not shown in the spec; documented): 256 KiB of UTF-8. */
export const TRAINING_MAX_BYTES = 256 * 1024;

/** Spec 2.5, 4.4: what POST /research and the `start_research` tool answer. */
export interface ResearchAccepted {
  job_id: string;
  status: 'queued';
  poll: string;
}

/** Spec 2.6, 4.4 rule 4: what POST /training and the `add_training_document` tool answer (field names not shown in the spec). */
export interface TrainingAccepted {
  document_id: string;
  job_id: string;
  processing_step: 'received';
  status: string;
}

/** Where the person opens a training document. */
export interface TrainingLink {
  document_id: string;
  url: string;
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
  readonly askTimeoutMs: number;
  readonly askLatencyMs: number;
  readonly timings: JobTimings;
  readonly faults: Faults | undefined;
  /** Hands out the variants of new answers, jobs and documents; null unless --vary-unspecified or --profile. */
  readonly variation: Variation | null;
  readonly #sleep: Sleep;
  readonly #fileNames = new Map<string, string>();
  #settling: { promise: Promise<boolean> } | null = null;
  /** The clock time the newest scheduled settle run covers at least. */
  #settlingTo = -Infinity;
  /** The jobs and documents settle moves on: a long run's state holds many finished ones. */
  readonly #unfinishedJobs: ReadonlySet<string>;
  readonly #unfinishedDocuments: ReadonlySet<string>;

  constructor(
    private readonly core: Core,
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
    this.variation =
      options.varyUnspecified || options.profile
        ? new Variation(options.varyUnspecified ? options.varyUnspecified.seed : null, options.profile ?? null)
        : null;
    this.#unfinishedJobs = core.repo.where('research_jobs', (job) => job.status !== 'succeeded' && job.status !== 'failed');
    this.#unfinishedDocuments = core.repo.where(
      'training_documents',
      (doc) => doc.processing_step !== 'indexed' && doc.processing_step !== 'failed',
    );
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

  // ---- research (spec 2.5, 3.1, 4.4 rule 3) ---------------------------------------------------

  /** Queues a research job; answers at once (REST: 202) and is charged once (spec 1). */
  async startResearch(access: AccessContext, question: string): Promise<Charged<ResearchAccepted>> {
    checkQuestion(question);
    const now = this.core.clock.now();
    // A research_fail fault marks the job now; it fails when it would have finished.
    const fault = requestFault(this.faults, 'research_fail', access, { method: 'POST', path: '/research', question });
    const variant = this.variation?.next('research');
    const job: ResearchJob = {
      id: idFor(variant, 'job'),
      client_id: access.client_id,
      grant_id: access.grant.id,
      person_id: access.person_id,
      question,
      status: 'queued',
      created_at: now,
      queued_until: now + this.timings.researchQueueMs,
      running_until: now + this.timings.researchQueueMs + this.timings.researchRunMs,
      ...(fault ? { fault_id: fault.id } : {}),
      ...(variant ? { variation: variant } : {}),
    };
    this.core.repo.put('research_jobs', job.id, job);
    this.core.events.emit('research.created', { job_id: job.id, client_id: job.client_id, grant_id: job.grant_id, question });
    const value: ResearchAccepted = { job_id: job.id, status: 'queued', poll: `/research/${job.id}` };
    if (!variant) return { value, charge: this.prices.research };
    return { value: varyResearchCreated(value, variant), charge: this.prices.research, variant: describeVariant(variant) };
  }

  /** The job as its owner sees it (spec 2.5), in the variants it was created with; another client's job does not exist for the caller. */
  async researchView(access: AccessContext, jobId: string): Promise<Answer<ResearchJobView>> {
    await this.settle();
    const job = this.core.repo.get('research_jobs', jobId);
    if (!job || !belongsTo(job, access)) throw new ProblemError('research_job_not_found', `no research job "${jobId}"`);
    const view: ResearchJobView = {
      job_id: job.id,
      status: job.status,
      poll: `/research/${job.id}`,
      question: job.question,
      created_at: new Date(job.created_at).toISOString(),
      ...(job.finished_at ? { finished_at: new Date(job.finished_at).toISOString() } : {}),
      ...(job.status === 'succeeded' ? { report: job.report, citations: job.citations } : {}),
      ...(job.status === 'failed' ? { error: job.error } : {}),
    };
    if (!job.variation) return { value: view };
    return { value: varyResearchJob(view, job.variation), variant: describeVariant(job.variation) };
  }

  // ---- training (spec 2.6, 4.4 rule 4) ---------------------------------------------------------

  /** Accepts a document for ingest (REST: 202): it becomes findable only once indexed. Free. */
  async startTraining(access: AccessContext, fileName: string, content: string): Promise<Answer<TrainingAccepted>> {
    validateFileName(fileName);
    if (content.trim() === '') throw new ProblemError('content_empty', 'content is empty');
    const size = Buffer.byteLength(content, 'utf8');
    if (size > TRAINING_MAX_BYTES)
      throw new ProblemError('content_too_large', `content is ${size} bytes; at most ${TRAINING_MAX_BYTES} bytes (256 KiB) are accepted`);
    const now = this.core.clock.now();
    const variant = this.variation?.next('training');
    const doc: TrainingDocument = {
      id: idFor(variant, 'doc'),
      client_id: access.client_id,
      grant_id: access.grant.id,
      person_id: access.person_id,
      file_name: fileName,
      title: markdownTitle(content, fileName),
      content,
      size,
      created_at: now,
      step_ms: this.timings.trainingStepMs,
      processing_step: 'received',
      ...(variant ? { variation: variant } : {}),
    };
    this.core.repo.put('training_documents', doc.id, doc);
    this.core.events.emit('training.received', {
      document_id: doc.id,
      client_id: doc.client_id,
      grant_id: doc.grant_id,
      file_name: fileName,
      size,
    });
    if (!variant) return { value: { document_id: doc.id, job_id: doc.id, processing_step: 'received', status: `/training/${doc.id}` } };
    return { value: varyTrainingAccepted(doc.id, variant), variant: describeVariant(variant) };
  }

  async trainingView(access: AccessContext, documentId: string): Promise<Answer<TrainingDocumentView>> {
    const doc = await this.#ownDocument(access, documentId);
    const view: TrainingDocumentView = {
      document_id: doc.id,
      file_name: doc.file_name,
      title: doc.title,
      size: doc.size,
      processing_step: doc.processing_step,
      created_at: new Date(doc.created_at).toISOString(),
      ...(doc.indexed_at ? { indexed_at: new Date(doc.indexed_at).toISOString() } : {}),
      ...(doc.error ? { error: doc.error } : {}),
      url: `/training/${doc.id}/url`,
    };
    if (!doc.variation) return { value: view };
    return { value: varyTrainingDocument(view, doc.variation), variant: describeVariant(doc.variation) };
  }

  /** A link on `{auth_url}` where the person opens the document in the browser. */
  async trainingUrl(access: AccessContext, documentId: string): Promise<Answer<TrainingLink>> {
    const doc = await this.#ownDocument(access, documentId);
    const value: TrainingLink = { document_id: doc.id, url: `${this.core.urls.authUrl}/documents/${encodeURIComponent(doc.id)}` };
    if (!doc.variation) return { value };
    return { value: varyTrainingUrl(value, doc.variation), variant: describeVariant(doc.variation) };
  }

  async #ownDocument(access: AccessContext, documentId: string): Promise<TrainingDocument> {
    await this.settle();
    const doc = this.core.repo.get('training_documents', documentId);
    if (!doc || !belongsTo(doc, access)) throw new ProblemError('training_document_not_found', `no training document "${documentId}"`);
    return doc;
  }

  /** A knowledge document as a person may open it: a fixture or a scenario's shared one, or a training document of that person. */
  documentFor(personId: string, id: string): KnowledgeDocument | undefined {
    const fixture = this.knowledge.find((d) => d.id === id) ?? this.core.repo.get('shared_knowledge', id);
    if (fixture) return fixture;
    const doc = this.core.repo.get('training_documents', id);
    return doc && doc.person_id === personId ? asKnowledge(doc) : undefined;
  }

  // ---- moving jobs on the clock ----------------------------------------------------------------

  /**
   * Moves every research job and training document to where the clock says it is, publishing each step.
   * Called on every read and by the emulator's ticker; calls never overlap. Returns whether anything changed
   * (the caller commits).
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
    let changed = false;
    // Training first: a research job finishing later on the clock reads what was indexed before it.
    // Copied: each step changes the set, and the awaits let requests change it too.
    for (const id of [...this.#unfinishedDocuments]) {
      const doc = this.core.repo.get('training_documents', id);
      if (!doc || doc.processing_step === 'indexed' || doc.processing_step === 'failed') continue;
      let step = trainingStepAt(doc, now);
      if (step === doc.processing_step) continue;
      let error: TrainingDocument['error'];
      if (unreadable(doc.content) && TRAINING_STEPS.indexOf(step as never) >= TRAINING_STEPS.indexOf('parsing')) {
        step = 'failed';
        error = { code: 'unreadable_content', message: 'Das Dokument enthält Steuerzeichen und ist kein lesbarer Text.' };
      }
      const moved = this.core.repo.update('training_documents', doc.id, {
        processing_step: step,
        ...(error ? { error } : {}),
        ...(step === 'indexed' ? { indexed_at: doc.created_at + doc.step_ms * (TRAINING_STEPS.length - 1) } : {}),
      });
      if (step === 'indexed') {
        this.#fileNames.set(moved.id, moved.file_name);
        await this.search.addKnowledge(asKnowledge(moved));
      }
      this.core.events.emit('training.step', {
        document_id: doc.id,
        client_id: doc.client_id,
        processing_step: step,
        ...(error ? { error: `${error.code}: ${error.message}` } : {}),
      });
      changed = true;
    }
    for (const id of [...this.#unfinishedJobs]) {
      const job = this.core.repo.get('research_jobs', id);
      if (!job || job.status === 'succeeded' || job.status === 'failed') continue;
      if (now >= job.running_until) {
        // A document indexed after the job finished (on the clock) was not there for it to read.
        const hits = (await this.search.search(job.question, { person: job.person_id, limit: 8, knowledgeOnly: true }))
          .filter((hit) => (this.core.repo.get('training_documents', hit.id)?.indexed_at ?? -Infinity) <= job.running_until)
          .slice(0, 6);
        // Jobs asking the same question over the same index read the same hits and get the same report.
        const written = await this.search.memo(
          JSON.stringify(['report', job.question, hits.map((h) => [h.kind, h.id, h.score])]),
          (analyze) => composeReport(job.question, hits, analyze, this.#fileNames),
        );
        const finished = { finished_at: job.running_until };
        if (job.fault_id || !written) {
          const error = job.fault_id
            ? {
                code: 'research_failed',
                message: `Die Recherche ist fehlgeschlagen; es wurde kein Bericht erstellt. (Absichtlich eingespeister Fehler ${job.fault_id}.)`,
              }
            : {
                code: 'no_sources',
                message: 'Zu dieser Frage enthält die Wissensdatenbank keine Quellen; es wurde kein Bericht erstellt.',
              };
          this.core.repo.update('research_jobs', job.id, { ...finished, status: 'failed', error });
          this.core.events.emit('research.failed', { job_id: job.id, client_id: job.client_id, error: error.code, message: error.message });
        } else {
          const { report, citations } = written;
          this.core.repo.update('research_jobs', job.id, { ...finished, status: 'succeeded', report, citations });
          this.core.events.emit('research.succeeded', { job_id: job.id, client_id: job.client_id, citations: citations.length });
        }
        changed = true;
      } else if (now >= job.queued_until && job.status === 'queued') {
        this.core.repo.update('research_jobs', job.id, { status: 'running' });
        this.core.events.emit('research.running', { job_id: job.id, client_id: job.client_id });
        changed = true;
      }
    }
    if (changed) await this.core.commit();
    return changed;
  }
}

/** A new id: in the form the variant chose (--vary-unspecified), else the emulator's own. */
const idFor = (variant: VariantSelection | undefined, prefix: string, plain: () => string = () => newId(prefix)): string =>
  variant ? formatId(variant.choices.ids, prefix, randomBytesFor(16)) : plain();

/** Jobs and documents are their client's and their person's; anyone else gets 404. */
const belongsTo = (record: { client_id: string; person_id: string }, access: AccessContext): boolean =>
  record.client_id === access.client_id && record.person_id === access.person_id;

const asKnowledge = (doc: TrainingDocument): KnowledgeDocument => ({
  id: doc.id,
  title: doc.title,
  file_name: doc.file_name,
  content: doc.content,
  owner: doc.person_id,
});

function validateFileName(name: string): void {
  const problem = fileNameProblem(name);
  if (problem) throw new ProblemError('invalid_file_name', `file_name ${problem}`);
}

/** A question must say something; its type and length are QUESTION's (inputs.ts), checked where it enters. */
function checkQuestion(question: string): void {
  if (question.trim() === '') throw new ProblemError('invalid_request', 'question must not be empty');
}
