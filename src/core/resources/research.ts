import { composeReport } from './compose.js';
import type { Prices } from '../state/charges.js';
import type { CoreContext } from '../context.js';
import { ProblemError } from '../state/errors.js';
import type { FaultPoint } from './fault-point.js';
import type { JobTimings, ResearchJob } from './jobs.js';
import { requestFault, type Answer, type Charged } from './metering.js';
import { belongsTo, type AccessContext } from '../oauth/resource-guard.js';
import type { SearchIndex } from './search.js';
import { idFor } from './ids.js';
import { describeVariant, varyResearchCreated, varyResearchJob, type ResearchJobView, type VariantSource } from './variants.js';

/** Spec 2.5, 4.4: what POST /research and the `start_research` tool answer. */
export interface ResearchAccepted {
  job_id: string;
  status: 'queued';
  poll: string;
}

/** What research reads: the index the resource service keeps, and the file names of its knowledge documents. */
export interface ResearchSources {
  search: SearchIndex;
  fileNames: ReadonlyMap<string, string>;
}

/**
 * Research jobs (spec 2.5, 3.1, 4.4 rule 3): queued at once and charged once, then running, then a report of what
 * the knowledge base holds, or failed. They move on the clock in `settle`, which the resource service's job clock calls.
 */
export class Research {
  /** The jobs settle moves on: a long run's state holds many finished ones. */
  readonly #unfinished: ReadonlySet<string>;

  constructor(
    private readonly core: CoreContext,
    private readonly sources: ResearchSources,
    private readonly options: { timings: JobTimings; prices: Prices; faults: FaultPoint | undefined; variation: VariantSource | null },
  ) {
    this.#unfinished = core.repo.where('research_jobs', (job) => job.status !== 'succeeded' && job.status !== 'failed');
  }

  /** Queues a research job; answers at once (REST: 202) and is charged once (spec 1). */
  start(access: AccessContext, question: string): Charged<ResearchAccepted> {
    checkQuestion(question);
    const now = this.core.clock.now();
    const { timings, prices } = this.options;
    // A research_fail fault marks the job now; it fails when it would have finished.
    const fault = requestFault(this.options.faults, 'research_fail', access, { method: 'POST', path: '/research', question });
    const variant = this.options.variation?.next('research');
    const job: ResearchJob = {
      id: idFor(variant, 'job'),
      client_id: access.client_id,
      grant_id: access.grant.id,
      person_id: access.person_id,
      question,
      status: 'queued',
      created_at: now,
      queued_until: now + timings.researchQueueMs,
      running_until: now + timings.researchQueueMs + timings.researchRunMs,
      ...(fault ? { fault_id: fault.id } : {}),
      ...(variant ? { variation: variant } : {}),
    };
    this.core.repo.put('research_jobs', job.id, job);
    this.core.events.emit('research.created', { job_id: job.id, client_id: job.client_id, grant_id: job.grant_id, question });
    const value: ResearchAccepted = { job_id: job.id, status: 'queued', poll: `/research/${job.id}` };
    if (!variant) return { value, charge: prices.research };
    return { value: varyResearchCreated(value, variant), charge: prices.research, variant: describeVariant(variant) };
  }

  /**
   * The job as its owner sees it (spec 2.5), in the variants it was created with; another client's job does not exist
   * for the caller. The caller settles first.
   */
  view(access: AccessContext, jobId: string): Answer<ResearchJobView> {
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

  /** The settle step: each job to where the clock `now` says it is, each move published. Returns whether any moved. */
  async settle(now: number): Promise<boolean> {
    let changed = false;
    // Copied: each step changes the set, and the awaits let requests change it too.
    for (const id of [...this.#unfinished]) {
      const job = this.core.repo.get('research_jobs', id);
      if (!job || job.status === 'succeeded' || job.status === 'failed') continue;
      if (now >= job.running_until) {
        await this.#finish(job);
        changed = true;
      } else if (now >= job.queued_until && job.status === 'queued') {
        this.core.repo.update('research_jobs', job.id, { status: 'running' });
        this.core.events.emit('research.running', { job_id: job.id, client_id: job.client_id });
        changed = true;
      }
    }
    return changed;
  }

  /** A job whose time is up: its report from what was findable when it finished (on the clock), or its failure. */
  async #finish(job: ResearchJob): Promise<void> {
    const { search, fileNames } = this.sources;
    // A document indexed after the job finished (on the clock) was not there for it to read.
    const hits = (await search.search(job.question, { person: job.person_id, limit: 8, knowledgeOnly: true }))
      .filter((hit) => (this.core.repo.get('training_documents', hit.id)?.indexed_at ?? -Infinity) <= job.running_until)
      .slice(0, 6);
    // Jobs asking the same question over the same index read the same hits and get the same report.
    const written = await search.memo(JSON.stringify(['report', job.question, hits.map((h) => [h.kind, h.id, h.score])]), (analyze) =>
      composeReport(job.question, hits, analyze, fileNames),
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
  }
}

/** A question must say something; its type and length are QUESTION's (inputs.ts), checked where it enters. */
export function checkQuestion(question: string): void {
  if (question.trim() === '') throw new ProblemError('invalid_request', 'question must not be empty');
}
