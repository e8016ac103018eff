/**
 * `serve --vary-unspecified`: what varies, and what one response object was given. Apart from the rest of
 * variation.ts because jobs and documents store their selection (jobs.ts), and variation.ts shapes jobs.
 */

/**
 * Every dimension that varies, per kind of response object, with its variants. The first variant of each
 * dimension is what the emulator answers without the mode (the README's "the emulator does").
 */
export const CATALOGUE = {
  ask: {
    /** Spec 2.4: an array that may be empty; element shape not shown. */
    sources: ['objects', 'renamed', 'strings', 'nested', 'empty'],
    /** Fields beyond answer, sources and message_id. */
    extra_fields: ['emulator', 'unknown'],
    /** message_id: a string; its form is not shown. */
    ids: ['prefixed', 'uuid', 'numeric'],
  },
  research: {
    /** Spec 3.1: the status between queued and done is unlisted; `queued` means none is shown at all. */
    'status.running': ['running', 'in_progress', 'processing', 'pending', 'queued'],
    /** Spec 3.1: a failed job's status is not named. */
    'status.failed': ['failed', 'error', 'errored', 'aborted'],
    /** Spec 2.5: type not shown. */
    report: ['markdown', 'markdown_object', 'sections', 'structured'],
    /** Spec 2.5: an array; element shape not shown. */
    citations: ['objects', 'renamed', 'strings', 'nested'],
    /** Spec 2.5: type not shown. */
    error: ['code_message', 'string', 'problem', 'renamed'],
    /** Spec 2.5 says when report, citations and error are present, not that they are absent otherwise. */
    absent_fields: ['omitted', 'null'],
    /** Fields the spec does not list: the emulator's own, none (poll is promised on creation only), or unknown ones too. */
    extra_fields: ['emulator', 'spec_only', 'unknown'],
    /** job_id: a string; its form is not shown. */
    ids: ['prefixed', 'uuid', 'numeric'],
  },
  training: {
    /** Spec 3.1, 2.6: values of processing_step not shown. */
    processing_step: ['emulator', 'pipeline', 'coarse', 'verbose'],
    /** Spec 4.4: POST /training carries a job id; field names not shown. */
    accepted: ['emulator', 'job_id', 'id', 'document_id'],
    /** Spec 4.4: GET /training/{id}/url, response not shown. */
    url: ['emulator', 'url', 'href'],
    /** Spec 2.6: GET /training/{id} holds processing_step; the rest is not shown. */
    extra_fields: ['emulator', 'spec_only', 'unknown'],
    /** The document id (also the job id): its form is not shown. */
    ids: ['prefixed', 'uuid', 'numeric'],
  },
} as const satisfies Record<string, Record<string, readonly string[]>>;

export type Catalogue = typeof CATALOGUE;
export type VariedKind = keyof Catalogue;
export type Dimension<K extends VariedKind> = keyof Catalogue[K] & string;
export type Choices<K extends VariedKind> = { -readonly [D in Dimension<K>]: Catalogue[K][D] extends readonly (infer V)[] ? V : never };

/** What one response object was given. Stored with jobs and documents, so each keeps its variant across polls and restarts. */
export interface VariantSelection<K extends VariedKind = VariedKind> {
  kind: K;
  /** The --vary-unspecified seed; null when a profile alone chose (`serve --profile` without the mode). */
  seed: number | null;
  /** The object's place among the objects of its kind since the emulator started: 0, 1, 2, … */
  ordinal: number;
  choices: Choices<K>;
  /** `serve --profile`: the profile whose dimensions were pinned (its name, for the Agent-Access-Variant header). */
  profile?: string;
}

/** What a profile pins (`serve --profile`): per kind, the dimensions answered the observed way. */
export type PinnedChoices = { [K in VariedKind]?: Partial<Choices<K>> };
