/**
 * What the resource plane answers in a selected variant (`serve --vary-unspecified`, `serve --profile`; the selection
 * comes from emulation/variation.ts through VariantSource): the functions that turn the emulator's canonical answers
 * into a variant, and the header that names it. Everything the spec promises stays: the listed fields with their
 * types and values.
 */
import type { AskAnswer } from './ask.js';
import type { Citation, ResearchStatus, TrainingStep } from './jobs.js';
import { sourceLabel, type Source } from './search.js';
import type { Choices, VariantSelection, VariedKind } from '../state/variant-catalogue.js';

/** Hands out the variant of each next answer of a kind (emulation/variation.ts); null where nothing varies. */
export interface VariantSource {
  next<K extends VariedKind>(kind: K): VariantSelection<K>;
}

/** FNV-1a, 32 bit: a small, stable hash, so the same seed gives the same variants on every machine and version of Node. */
export function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash >>> 0;
}

/** Response header naming what a response varied: emulator-only diagnostics, never part of the service. */
export const VARIANT_HEADER = 'agent-access-variant';

/**
 * The header value: an RFC 8941 dictionary (`seed=7, ordinal=3, research.report=sections, …`) naming every
 * dimension of the object, also those that show only later (a job's failed status while it still runs). Under a
 * profile it names it too (`profile="service.json"`), and without --vary-unspecified it has no seed.
 */
export function describeVariant(selection: VariantSelection): string {
  const choices = Object.entries(selection.choices as Record<string, string>).map(
    ([dimension, variant]) => `${selection.kind}.${dimension}=${variant}`,
  );
  return [
    ...(selection.seed !== null ? [`seed=${selection.seed}`] : []),
    ...(selection.profile !== undefined ? [`profile=${sfString(selection.profile)}`] : []),
    `ordinal=${selection.ordinal}`,
    ...choices,
  ].join(', ');
}

/** An RFC 8941 sf-string: printable ASCII only, `\` and `"` escaped; anything else becomes `?`. */
const sfString = (text: string): string => `"${text.replace(/[^\x20-\x7e]/g, '?').replace(/[\\"]/g, (c) => `\\${c}`)}"`;

// ---- identifiers ------------------------------------------------------------------------------

export type IdFormat = Choices<VariedKind>['ids'];

/** An id in the selected form, from 16 random bytes: `job_3fZ…` (the emulator's), a UUID, or a string of 18 digits. */
export function formatId(format: IdFormat, prefix: string, random: Uint8Array): string {
  if (random.length < 16) throw new RangeError('formatId needs 16 random bytes');
  const bytes = Buffer.from(random.subarray(0, 16));
  switch (format) {
    case 'uuid': {
      bytes[6] = (bytes[6]! & 0x0f) | 0x40;
      bytes[8] = (bytes[8]! & 0x3f) | 0x80;
      const hex = bytes.toString('hex');
      return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
    }
    case 'numeric':
      // Eighteen digits, no leading zero: more than a double holds exactly, so a client must keep it a string.
      return String(100_000_000_000_000_000n + (bytes.readBigUInt64BE(0) % 900_000_000_000_000_000n));
    default:
      return `${prefix}_${bytes.subarray(0, 12).toString('base64url')}`;
  }
}

// ---- unknown fields -----------------------------------------------------------------------------

const WORDS = ['quorvex', 'tilbard', 'munsk', 'prevalt', 'orrin', 'zefta', 'kalmor', 'vindle'];
const VALUES: readonly unknown[] = [
  { nested: { depth: 2, items: [1, 'zwei', null] } },
  'unbekannt',
  42,
  null,
  true,
  [3, 1, 4],
  1.5,
  { enabled: false },
];
const hex6 = (n: number) => n.toString(16).padStart(8, '0').slice(0, 6);

/** Fields no client could know: one `x_` prefixed, one arbitrary; stable for the same object and place. */
function unknownFields(selection: VariantSelection, place: string): Record<string, unknown> {
  const a = fnv1a(`${selection.seed}:${selection.kind}:${selection.ordinal}:${place}:a`);
  const b = fnv1a(`${selection.seed}:${selection.kind}:${selection.ordinal}:${place}:b`);
  return { [`x_${hex6(a)}`]: VALUES[a % VALUES.length], [`${WORDS[b % WORDS.length]}_${hex6(b)}`]: VALUES[b % VALUES.length] };
}

/** One unknown field inside an element of an array. */
function unknownElementField(selection: VariantSelection, place: string): Record<string, unknown> {
  const a = fnv1a(`${selection.seed}:${selection.kind}:${selection.ordinal}:${place}`);
  return { [`x_${hex6(a)}`]: VALUES[a % VALUES.length] };
}

/** Adds an unknown field to each element that is an object; strings stay strings. */
function withUnknownInElements(items: unknown[], selection: VariantSelection, place: string): unknown[] {
  return items.map((item, i) =>
    typeof item === 'object' && item !== null && !Array.isArray(item)
      ? { ...item, ...unknownElementField(selection, `${place}[${i}]`) }
      : item,
  );
}

// ---- ask (spec 2.4) -----------------------------------------------------------------------------

function varySource(source: Source, variant: Choices<'ask'>['sources']): unknown {
  switch (variant) {
    case 'renamed':
      return { type: source.kind, ref: source.id, name: source.title, excerpt: source.snippet };
    case 'strings':
      return `${sourceLabel(source.kind)} „${source.title}“`;
    case 'nested':
      return { record: { kind: source.kind, id: source.id, title: source.title }, quote: source.snippet };
    default:
      return source;
  }
}

/** POST /chat/ask: answer and message_id as they are; sources in the selected shape; unknown fields when selected. */
export function varyAskAnswer(answer: AskAnswer, selection: VariantSelection<'ask'>): Record<string, unknown> {
  const { sources: shape, extra_fields: extras } = selection.choices;
  let sources: unknown[] = shape === 'empty' ? [] : answer.sources.map((s) => varySource(s, shape));
  if (extras === 'unknown') sources = withUnknownInElements(sources, selection, 'sources');
  return {
    answer: answer.answer,
    sources,
    message_id: answer.message_id,
    ...(extras === 'unknown' ? unknownFields(selection, 'answer') : {}),
  };
}

// ---- research (spec 2.5, 3.1) ---------------------------------------------------------------------

/** The job as the emulator shows it without the mode (GET /research/{job_id}). */
export interface ResearchJobView {
  job_id: string;
  status: ResearchStatus;
  poll: string;
  question: string;
  created_at: string;
  finished_at?: string;
  report?: string;
  citations?: Citation[];
  error?: { code: string; message: string };
}

/** The report's Markdown cut at its `#` and `##` headings; deeper headings stay in the text. */
function markdownSections(markdown: string): Array<{ heading: string; level: number; text: string }> {
  const sections: Array<{ heading: string; level: number; lines: string[] }> = [];
  for (const line of markdown.split('\n')) {
    const heading = /^(#{1,2}) (.*)$/.exec(line);
    if (heading) sections.push({ heading: heading[2]!, level: heading[1]!.length, lines: [] });
    else if (sections.length) sections[sections.length - 1]!.lines.push(line);
    else if (line.trim() !== '') sections.push({ heading: '', level: 1, lines: [line] });
  }
  return sections.map((s) => ({ heading: s.heading, level: s.level, text: s.lines.join('\n').trim() }));
}

export function varyReport(report: string, variant: Choices<'research'>['report']): unknown {
  switch (variant) {
    case 'markdown_object':
      return { format: 'markdown', text: report };
    case 'sections':
      return markdownSections(report);
    case 'structured': {
      const [first, ...rest] = markdownSections(report);
      const title = first && first.level === 1 ? first.heading : '';
      const sections = first && first.level === 1 ? rest : [first, ...rest].filter((s) => s !== undefined);
      return {
        title,
        sections: sections.map((s) => ({ heading: s.heading, paragraphs: s.text.split(/\n{2,}/).filter((p) => p.trim() !== '') })),
      };
    }
    default:
      return report;
  }
}

export function varyCitation(citation: Citation, index: number, variant: Choices<'research'>['citations']): unknown {
  switch (variant) {
    case 'renamed':
      return { source_id: citation.id, name: citation.title, file: citation.file_name, excerpt: citation.snippet };
    case 'strings':
      return `${citation.title} (${citation.file_name})`;
    case 'nested':
      return {
        ref: index + 1,
        document: { id: citation.id, title: citation.title, file_name: citation.file_name },
        quote: citation.snippet,
      };
    default:
      return citation;
  }
}

export function varyError(error: { code: string; message: string }, variant: Choices<'research'>['error']): unknown {
  switch (variant) {
    case 'string':
      return error.message;
    case 'problem':
      return { type: `urn:agent-access:error:${error.code}`, title: error.code, detail: error.message };
    case 'renamed':
      return { reason: error.code, details: { message: error.message } };
    default:
      return error;
  }
}

/** The status a client sees: queued and succeeded as the spec lists them; the unlisted and unnamed ones as selected. */
export function researchStatus(status: ResearchStatus, choices: Choices<'research'>): string {
  // `??`: a job stored before a dimension existed shows the emulator's value.
  if (status === 'running') return choices['status.running'] ?? status;
  if (status === 'failed') return choices['status.failed'] ?? status;
  return status;
}

/** POST /research (202): job_id, status queued and poll stay; unknown fields when selected. */
export function varyResearchCreated(
  body: { job_id: string; status: 'queued'; poll: string },
  selection: VariantSelection<'research'>,
): Record<string, unknown> {
  return { ...body, ...(selection.choices.extra_fields === 'unknown' ? unknownFields(selection, 'created') : {}) };
}

/** GET /research/{job_id}: job_id, queued and succeeded, report and citations once succeeded, error when failed stay. */
export function varyResearchJob(view: ResearchJobView, selection: VariantSelection<'research'>): Record<string, unknown> {
  const c = selection.choices;
  const body: Record<string, unknown> = { job_id: view.job_id, status: researchStatus(view.status, c) };
  if (c.extra_fields !== 'spec_only') {
    Object.assign(body, { poll: view.poll, question: view.question, created_at: view.created_at });
    if (view.finished_at !== undefined) body.finished_at = view.finished_at;
  }
  if (view.status === 'succeeded' && view.report !== undefined && view.citations) {
    body.report = varyReport(view.report, c.report);
    const citations = view.citations.map((citation, i) => varyCitation(citation, i, c.citations));
    body.citations = c.extra_fields === 'unknown' ? withUnknownInElements(citations, selection, 'citations') : citations;
  }
  if (view.status === 'failed' && view.error) body.error = varyError(view.error, c.error);
  if (c.absent_fields === 'null') {
    // Present but empty: a client must go by status, not by which fields exist (spec 4.4 rule 3).
    if (!('report' in body)) body.report = null;
    if (!('citations' in body)) body.citations = [];
    if (!('error' in body)) body.error = null;
  }
  if (c.extra_fields === 'unknown') Object.assign(body, unknownFields(selection, 'job'));
  return body;
}

// ---- training (spec 2.6, 4.4) ---------------------------------------------------------------------

/**
 * processing_step vocabularies, each a mapping of the emulator's steps. Each ends in a word `agent-access
 * train --wait` takes as done, and a failed document also carries `error`, as in the emulator's own vocabulary.
 */
export const PROCESSING_STEPS: Record<Choices<'training'>['processing_step'], Record<TrainingStep, string>> = {
  emulator: { received: 'received', parsing: 'parsing', chunking: 'chunking', indexing: 'indexing', indexed: 'indexed', failed: 'failed' },
  pipeline: {
    received: 'uploaded',
    parsing: 'extracting',
    chunking: 'splitting',
    indexing: 'embedding',
    indexed: 'ready',
    failed: 'error',
  },
  coarse: { received: 'queued', parsing: 'processing', chunking: 'processing', indexing: 'processing', indexed: 'done', failed: 'failed' },
  verbose: {
    received: 'pending',
    parsing: 'in_progress',
    chunking: 'in_progress',
    indexing: 'finalizing',
    indexed: 'completed',
    failed: 'rejected',
  },
};

export const processingStep = (step: TrainingStep, choices: Choices<'training'>): string =>
  (PROCESSING_STEPS[choices.processing_step] ?? PROCESSING_STEPS.emulator)[step] ?? step;

/** The document as the emulator shows it without the mode (GET /training/{document_id}). */
export interface TrainingDocumentView {
  document_id: string;
  file_name: string;
  title: string;
  size: number;
  processing_step: TrainingStep;
  created_at: string;
  indexed_at?: string;
  error?: { code: string; message: string };
  url: string;
}

/** POST /training (202): always a top-level job id, named `document_id`, `job_id` or `id` (the document id is the job id). */
export function varyTrainingAccepted(documentId: string, selection: VariantSelection<'training'>): Record<string, unknown> {
  const c = selection.choices;
  const received = processingStep('received', c);
  const body: Record<string, unknown> = (() => {
    switch (c.accepted) {
      case 'job_id':
        return { job_id: documentId };
      case 'id':
        return { id: documentId, status: 'accepted' };
      case 'document_id':
        return { document_id: documentId, processing_step: received };
      default:
        return { document_id: documentId, job_id: documentId, processing_step: received, status: `/training/${documentId}` };
    }
  })();
  return { ...body, ...(c.extra_fields === 'unknown' ? unknownFields(selection, 'accepted') : {}) };
}

/** GET /training/{document_id}: processing_step stays, in the selected vocabulary; a failed document keeps `error`. */
export function varyTrainingDocument(view: TrainingDocumentView, selection: VariantSelection<'training'>): Record<string, unknown> {
  const c = selection.choices;
  const step = processingStep(view.processing_step, c);
  if (c.extra_fields === 'spec_only') return { processing_step: step, ...(view.error ? { error: view.error } : {}) };
  return { ...view, processing_step: step, ...(c.extra_fields === 'unknown' ? unknownFields(selection, 'document') : {}) };
}

/** GET /training/{document_id}/url: the link under another field name, or alone. */
export function varyTrainingUrl(
  body: { document_id: string; url: string },
  selection: VariantSelection<'training'>,
): Record<string, unknown> {
  const c = selection.choices;
  const shaped = c.url === 'url' ? { url: body.url } : c.url === 'href' ? { href: body.url } : body;
  return { ...shaped, ...(c.extra_fields === 'unknown' ? unknownFields(selection, 'url') : {}) };
}
