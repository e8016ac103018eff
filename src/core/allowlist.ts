import { composeAnswer, type AskAnswer } from './ask.js';
import { DEFAULT_PRICES, type ChargeEntry, type Prices } from './charges.js';
import type { Core } from './core.js';
import type { AccessContext } from './resource-guard.js';
import { newId, randomBytesFor, randomToken, sha256 } from './crypto.js';
import { ProblemError } from './errors.js';
import { IDEMPOTENCY_WINDOW, idempotencyId, type StoredResponse } from './idempotency.js';
import { RateLimitedError, RateLimiter, type RateLimitConfig, type RateLimitState } from './rate-limit.js';
import { SearchIndex } from './search.js';
import type { FaultContext, FaultKind, Faults } from './faults.js';
import { markdownTitle, type KnowledgeDocument, type Workspace } from './workspace.js';
import { QUICK_TIMINGS, TRAINING_STEPS, researchReport, trainingStepAt, unreadable, type JobTimings, type ResearchJob, type TrainingDocument } from './jobs.js';
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
  type VariantSelection,
  type VaryUnspecified,
} from './variation.js';

export interface AllowlistOptions {
  workspace: Workspace;
  knowledge: KnowledgeDocument[];
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
}

/** Spec 2.6: training content is limited (not shown in the spec; documented): 256 KiB of UTF-8. */
export const TRAINING_MAX_BYTES = 256 * 1024;

/** What an operation hands back: its answer, and what it costs (spec 1). */
export interface OperationResult {
  status: number;
  body: unknown;
  charge?: number;
  /** With --vary-unspecified: what the body varied, for the Agent-Access-Variant header (emulator diagnostics). */
  variant?: string;
}

/**
 * The REST allowlist's logic (spec 4.4), shared by the REST routes and (later) the agent tools: rate limits
 * per grant, idempotency per client and route, charges, and the operations themselves.
 */
export class Allowlist {
  readonly search: SearchIndex;
  readonly knowledge: KnowledgeDocument[];
  readonly prices: Prices;
  readonly limiter: RateLimiter;
  readonly askTimeoutMs: number;
  readonly askLatencyMs: number;
  readonly timings: JobTimings;
  readonly faults: Faults | undefined;
  /** Hands out the variants of new answers, jobs and documents; null unless --vary-unspecified. */
  readonly variation: Variation | null;
  readonly #inFlight = new Set<string>();
  readonly #fileNames = new Map<string, string>();
  #settling: { promise: Promise<boolean> } | null = null;
  /** The clock time the newest scheduled settle run covers at least. */
  #settlingTo = -Infinity;

  constructor(private readonly core: Core, options: AllowlistOptions) {
    this.knowledge = options.knowledge;
    this.search = new SearchIndex(options.workspace, this.#findable());
    this.timings = { ...QUICK_TIMINGS, ...options.timings };
    this.prices = { ...DEFAULT_PRICES, ...options.prices };
    this.limiter = new RateLimiter(core.clock, options.rateLimit ?? { limit: 60, windowMs: 60_000 });
    this.askTimeoutMs = options.askTimeoutMs ?? 30_000;
    this.askLatencyMs = options.askLatencyMs ?? 0;
    this.faults = options.faults;
    this.variation = options.varyUnspecified ? new Variation(options.varyUnspecified.seed) : null;
  }

  /**
   * The knowledge base as the state has it: the fixtures' documents, a scenario's shared ones, and training
   * documents once indexed (so those indexed before a restart are findable again at once).
   */
  #findable(): KnowledgeDocument[] {
    const trained = this.core.repo.values('training_documents').filter((d) => d.processing_step === 'indexed').map(asKnowledge);
    const docs = [...this.knowledge, ...this.core.repo.values('shared_knowledge'), ...trained];
    this.#fileNames.clear();
    for (const doc of docs) this.#fileNames.set(doc.id, doc.file_name);
    return docs;
  }

  /** The state was replaced (a snapshot restore): search starts over from it, and rate-limit windows are forgotten. */
  reload(): void {
    this.limiter.clear();
    this.search.rebuild(this.#findable());
    // Built now rather than by the first ask after the restore; a failure shows there again.
    void this.search.warmUp().catch(() => undefined);
  }


  /**
   * Spec 7, 8: counts the request against its grant's window; throws RateLimitedError over the limit, or when a
   * rate_limit fault fires (`route`: `METHOD /path` as the spec writes it; `path`: as sent).
   */
  rateLimit(access: AccessContext, route: string, path?: string): RateLimitState {
    const [method, template] = route.split(' ');
    const fault = this.#fault('rate_limit', access, { method, route: template, path: path ?? template });
    if (fault) throw new RateLimitedError({ limit: this.limiter.config.limit, remaining: 0, reset: fault.retry_after ?? 1 });
    return this.limiter.take(access.grant.id);
  }

  /** A fault of `kind` for this caller's request, if one fires; recorded on the request for the log. */
  #fault(kind: FaultKind, access: AccessContext, ctx: FaultContext) {
    if (!this.faults?.armed) return null;
    const fault = this.faults.take(kind, { ...ctx, client_id: access.client_id, grant_id: access.grant.id });
    if (fault) access.faults.push(`${fault.id} ${fault.kind}`);
    return fault;
  }

  /**
   * Spec 4.4 rule 5. No key: the operation runs and is charged. A key: the first use runs and stores the
   * response; the same key and body again get that response back byte for byte, uncharged; the same key with
   * another body, or while the first is still running, is 409. Records last 24 hours on the clock. Only
   * successful responses are stored, so a failed call may be retried with its key.
   */
  async idempotent(access: AccessContext, route: string, key: string | undefined, rawBody: string, operation: () => Promise<OperationResult>): Promise<{ response: StoredResponse; replayed: boolean }> {
    if (key === undefined) {
      const response = await this.#run(access, route, null, operation);
      return { response, replayed: false };
    }
    const now = this.core.clock.now();
    const id = idempotencyId(access.client_id, access.person_id, route, key);
    const fingerprint = sha256(rawBody);
    // In flight first: until the first response is durable, a duplicate is told to wait, never replayed.
    if (this.#inFlight.has(id)) throw new ProblemError(409, 'idempotency_key_in_flight', `a request with Idempotency-Key "${key}" is still being processed`);
    const existing = this.core.repo.get('idempotency', id);
    if (existing && existing.expires_at > now) {
      if (existing.fingerprint !== fingerprint) {
        throw new ProblemError(409, 'idempotency_key_reused', `Idempotency-Key "${key}" was already used with a different request body`);
      }
      this.core.events.emit('idempotency.replayed', { client_id: access.client_id, grant_id: access.grant.id, route, key });
      return { response: existing.response, replayed: true };
    }
    this.#inFlight.add(id);
    try {
      const response = await this.#run(access, route, key, operation, (stored) => {
        this.core.repo.put('idempotency', id, { client_id: access.client_id, route, key, fingerprint, created_at: now, expires_at: now + IDEMPOTENCY_WINDOW, response: stored });
      });
      return { response, replayed: false };
    } finally {
      this.#inFlight.delete(id);
    }
  }

  async #run(access: AccessContext, route: string, key: string | null, operation: () => Promise<OperationResult>, store?: (response: StoredResponse) => void): Promise<StoredResponse> {
    const result = await operation();
    const response: StoredResponse = { status: result.status, content_type: 'application/json; charset=utf-8', body: JSON.stringify(result.body), ...(result.variant ? { variant: result.variant } : {}) };
    if (result.status < 300) {
      store?.(response);
      if (result.charge) this.core.recordCharge(this.#chargeEntry(access, route, result.charge, key));
      await this.core.commit();
    }
    return response;
  }

  #chargeEntry(access: AccessContext, route: string, amount: number, key: string | null): Omit<ChargeEntry, 'seq'> {
    return { at: this.core.clock.now(), client_id: access.client_id, grant_id: access.grant.id, route, amount, unit: 'AKh', idempotency_key: key };
  }

  /** Spec 2.4, 4.4 rules 1–2: a German answer grounded in what search found; read-only; abandoned past the timeout. */
  async ask(access: AccessContext, question: string): Promise<OperationResult> {
    const timedOut = () => new ProblemError(504, 'ask_timeout', `the question was abandoned after ${this.askTimeoutMs} ms (ask timeout); nothing was charged`);
    if (this.#fault('ask_timeout', access, { method: 'POST', path: '/chat/ask', question })) throw timedOut();
    const answer = (async () => {
      if (this.askLatencyMs > 0) await new Promise((resolve) => setTimeout(resolve, this.askLatencyMs));
      const hits = await this.search.search(question, { person: access.person_id, limit: 8 });
      return composeAnswer(question, hits, this.core.resource);
    })();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(timedOut()), this.askTimeoutMs);
    });
    try {
      const composed = await Promise.race([answer, timeout]);
      // Varied here, before idempotency stores it, so a replay sends the varied bytes again. An abandoned ask takes no variant.
      const variant = this.variation?.next('ask');
      const message_id = idFor(variant, 'msg', () => `msg_${randomToken(16)}`);
      const body: AskAnswer = { ...composed, message_id };
      if (!variant) return { status: 200, body, charge: this.prices.ask };
      return { status: 200, body: varyAskAnswer(body, variant), charge: this.prices.ask, variant: describeVariant(variant) };
    } finally {
      clearTimeout(timer);
    }
  }

  // ---- research (spec 2.5, 3.1, 4.4 rule 3) ---------------------------------------------------

  /** Queues a research job; answers at once with 202 and is charged once (spec 1). */
  async startResearch(access: AccessContext, question: string): Promise<OperationResult> {
    const now = this.core.clock.now();
    // A research_fail fault marks the job now; it fails when it would have finished.
    const fault = this.#fault('research_fail', access, { method: 'POST', path: '/research', question });
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
    const body = { job_id: job.id, status: 'queued' as const, poll: `/research/${job.id}` };
    if (!variant) return { status: 202, body, charge: this.prices.research };
    return { status: 202, body: varyResearchCreated(body, variant), charge: this.prices.research, variant: describeVariant(variant) };
  }

  /** The job as its owner sees it (spec 2.5), in the variants it was created with; another client's job does not exist for the caller. */
  async researchView(access: AccessContext, jobId: string): Promise<OperationResult> {
    await this.settle();
    const job = this.core.repo.get('research_jobs', jobId);
    if (!job || !belongsTo(job, access)) throw new ProblemError(404, 'not_found', `no research job "${jobId}"`);
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
    if (!job.variation) return { status: 200, body: view };
    return { status: 200, body: varyResearchJob(view, job.variation), variant: describeVariant(job.variation) };
  }

  // ---- training (spec 2.6, 4.4 rule 4) ---------------------------------------------------------

  /** Accepts a document for ingest (202): it becomes findable only once indexed. */
  async startTraining(access: AccessContext, fileName: string, content: string): Promise<OperationResult> {
    validateFileName(fileName);
    if (content.trim() === '') throw new ProblemError(400, 'empty_content', 'content is empty');
    const size = Buffer.byteLength(content, 'utf8');
    if (size > TRAINING_MAX_BYTES) throw new ProblemError(413, 'content_too_large', `content is ${size} bytes; at most ${TRAINING_MAX_BYTES} bytes (256 KiB) are accepted`);
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
    this.core.events.emit('training.received', { document_id: doc.id, client_id: doc.client_id, grant_id: doc.grant_id, file_name: fileName, size });
    if (!variant) return { status: 202, body: { document_id: doc.id, job_id: doc.id, processing_step: 'received', status: `/training/${doc.id}` } };
    return { status: 202, body: varyTrainingAccepted(doc.id, variant), variant: describeVariant(variant) };
  }

  async trainingView(access: AccessContext, documentId: string): Promise<OperationResult> {
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
    if (!doc.variation) return { status: 200, body: view };
    return { status: 200, body: varyTrainingDocument(view, doc.variation), variant: describeVariant(doc.variation) };
  }

  /** A link on `{auth_url}` where the person opens the document in the browser. */
  async trainingUrl(access: AccessContext, documentId: string): Promise<OperationResult> {
    const doc = await this.#ownDocument(access, documentId);
    const body = { document_id: doc.id, url: `${this.core.urls.authUrl}/documents/${encodeURIComponent(doc.id)}` };
    if (!doc.variation) return { status: 200, body };
    return { status: 200, body: varyTrainingUrl(body, doc.variation), variant: describeVariant(doc.variation) };
  }

  async #ownDocument(access: AccessContext, documentId: string): Promise<TrainingDocument> {
    await this.settle();
    const doc = this.core.repo.get('training_documents', documentId);
    if (!doc || !belongsTo(doc, access)) throw new ProblemError(404, 'not_found', `no training document "${documentId}"`);
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
    void run.promise.finally(() => {
      if (this.#settling === run) this.#settling = null;
    }).catch(() => undefined);
    return run.promise;
  }

  async #settle(): Promise<boolean> {
    const now = this.core.clock.now();
    let changed = false;
    // Training first: a research job finishing later on the clock reads what was indexed before it.
    for (const doc of this.core.repo.values('training_documents')) {
      if (doc.processing_step === 'indexed' || doc.processing_step === 'failed') continue;
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
      this.core.events.emit('training.step', { document_id: doc.id, client_id: doc.client_id, processing_step: step, ...(error ? { error: `${error.code}: ${error.message}` } : {}) });
      changed = true;
    }
    for (const job of this.core.repo.values('research_jobs')) {
      if (job.status === 'succeeded' || job.status === 'failed') continue;
      if (now >= job.running_until) {
        // A document indexed after the job finished (on the clock) was not there for it to read.
        const hits = (await this.search.search(job.question, { person: job.person_id, limit: 8, knowledgeOnly: true }))
          .filter((hit) => (this.core.repo.get('training_documents', hit.id)?.indexed_at ?? -Infinity) <= job.running_until)
          .slice(0, 6);
        const finished = { finished_at: job.running_until };
        if (job.fault_id || hits.length === 0) {
          const error = job.fault_id
            ? { code: 'research_failed', message: `Die Recherche ist fehlgeschlagen; es wurde kein Bericht erstellt. (Absichtlich eingespeister Fehler ${job.fault_id}.)` }
            : { code: 'no_sources', message: 'Zu dieser Frage enthält die Wissensdatenbank keine Quellen; es wurde kein Bericht erstellt.' };
          this.core.repo.update('research_jobs', job.id, { ...finished, status: 'failed', error });
          this.core.events.emit('research.failed', { job_id: job.id, client_id: job.client_id, error: error.code, message: error.message });
        } else {
          const { report, citations } = researchReport(job.question, hits, this.#fileNames);
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

const asKnowledge = (doc: TrainingDocument): KnowledgeDocument => ({ id: doc.id, title: doc.title, file_name: doc.file_name, content: doc.content, owner: doc.person_id });

/** A plain file name: 1–255 characters, no path, no control characters, a text extension. */
function validateFileName(name: string): void {
  const bad = (why: string) => new ProblemError(400, 'invalid_file_name', `file_name ${why}`);
  if (name.length === 0 || name.length > 255) throw bad('must be 1 to 255 characters');
  if (/[\/\\]/.test(name) || name === '.' || name === '..') throw bad('must be a plain file name, not a path');
  if (/[\u0000-\u001f\u007f]/.test(name)) throw bad('must not contain control characters');
  if (!/\.(md|markdown|txt)$/i.test(name)) throw bad('must end in .md, .markdown or .txt');
}
