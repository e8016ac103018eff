import type { CoreContext } from '../context.js';
import { ProblemError } from '../state/errors.js';
import { idFor } from './ids.js';
import { fileNameProblem } from '../state/inputs.js';
import { TRAINING_STEPS, trainingStepAt, unreadable, type JobTimings, type TrainingDocument } from './jobs.js';
import type { Answer } from './metering.js';
import { belongsTo, type AccessContext } from '../oauth/resource-guard.js';
import {
  describeVariant,
  varyTrainingAccepted,
  varyTrainingDocument,
  varyTrainingUrl,
  type TrainingDocumentView,
  type VariantSource,
} from './variants.js';
import { markdownTitle, type KnowledgeDocument } from './workspace.js';

/** Spec 2.6: training content is limited (not shown in the spec; documented): 256 KiB of UTF-8. */
export const TRAINING_MAX_BYTES = 256 * 1024;

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
 * Training documents (spec 2.6, 4.4 rule 4): accepted at once and free, then moved through their processing steps
 * on the clock in `settle`, which the resource service's job clock calls; findable only once indexed.
 */
export class Training {
  /** The documents settle moves on: a long run's state holds many indexed ones. */
  readonly #unfinished: ReadonlySet<string>;

  constructor(
    private readonly core: CoreContext,
    private readonly options: {
      timings: JobTimings;
      variation: VariantSource | null;
      /** Makes an indexed document findable; awaited before its step is published. */
      indexed: (doc: TrainingDocument) => Promise<void>;
    },
  ) {
    this.#unfinished = core.repo.where(
      'training_documents',
      (doc) => doc.processing_step !== 'indexed' && doc.processing_step !== 'failed',
    );
  }

  /** Accepts a document for ingest (REST: 202): it becomes findable only once indexed. Free. */
  start(access: AccessContext, fileName: string, content: string): Answer<TrainingAccepted> {
    const problem = fileNameProblem(fileName);
    if (problem) throw new ProblemError('invalid_file_name', `file_name ${problem}`);
    if (content.trim() === '') throw new ProblemError('content_empty', 'content is empty');
    const size = Buffer.byteLength(content, 'utf8');
    if (size > TRAINING_MAX_BYTES)
      throw new ProblemError('content_too_large', `content is ${size} bytes; at most ${TRAINING_MAX_BYTES} bytes (256 KiB) are accepted`);
    const now = this.core.clock.now();
    const variant = this.options.variation?.next('training');
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
      step_ms: this.options.timings.trainingStepMs,
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

  /** The document as its owner sees it, in the variants it was created with. The caller settles first. */
  view(access: AccessContext, documentId: string): Answer<TrainingDocumentView> {
    const doc = this.#own(access, documentId);
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

  /** A link on `{auth_url}` where the person opens the document in the browser. The caller settles first. */
  url(access: AccessContext, documentId: string): Answer<TrainingLink> {
    const doc = this.#own(access, documentId);
    const value: TrainingLink = { document_id: doc.id, url: `${this.core.urls.authUrl}/documents/${encodeURIComponent(doc.id)}` };
    if (!doc.variation) return { value };
    return { value: varyTrainingUrl(value, doc.variation), variant: describeVariant(doc.variation) };
  }

  #own(access: AccessContext, documentId: string): TrainingDocument {
    const doc = this.core.repo.get('training_documents', documentId);
    if (!doc || !belongsTo(doc, access)) throw new ProblemError('training_document_not_found', `no training document "${documentId}"`);
    return doc;
  }

  /** The settle step: each document to the step the clock `now` says, each step published. Returns whether any moved. */
  async settle(now: number): Promise<boolean> {
    let changed = false;
    // Copied: each step changes the set, and the awaits let requests change it too.
    for (const id of [...this.#unfinished]) {
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
      if (step === 'indexed') await this.options.indexed(moved);
      this.core.events.emit('training.step', {
        document_id: doc.id,
        client_id: doc.client_id,
        processing_step: step,
        ...(error ? { error: `${error.code}: ${error.message}` } : {}),
      });
      changed = true;
    }
    return changed;
  }
}

/** A training document as the knowledge base holds it once indexed. */
export const asKnowledge = (doc: TrainingDocument): KnowledgeDocument => ({
  id: doc.id,
  title: doc.title,
  file_name: doc.file_name,
  content: doc.content,
  owner: doc.person_id,
});
