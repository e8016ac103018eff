/**
 * Issue 43: what a server does where the spec says "not shown", recorded as a profile the emulator can answer with
 * (`serve --profile`). The classifier is the inverse of resources/variants.ts: every variant it produces is named
 * back here, per dimension of the catalogue; a shape no variant makes keeps a small example instead.
 *
 * Pure: answers in, a profile out; parseProfile checks a profile read from a file.
 */
import { PROCESSING_STEPS } from '../resources/variants.js';
import { CATALOGUE, type PinnedChoices, type VariedKind } from '../state/variant-catalogue.js';

export type ObservedStep = 'ask' | 'research.created' | 'research.poll' | 'training.accepted' | 'training.status' | 'training.url';
/** One answer a server gave, as the `conformance server` run saw it (status and parsed JSON body). */
export interface ObservedResponse {
  step: ObservedStep;
  status: number;
  body: unknown;
}
/**
 * A dimension whose observed shape matches a known variant names it; otherwise it keeps an example and says the
 * emulator cannot mimic it yet. A named variant may carry a note too: what other answers of the run showed.
 */
export type ProfiledDimension = { variant: string; note?: string } | { variant: null; example: unknown; note: string };
export interface VariantProfile {
  version: 1;
  /** The base URL that was checked. */
  server: string;
  /** ISO 8601 time of the run. */
  recorded_at: string;
  /** Per kind and dimension of the catalogue: what the server did. A dimension the run never saw is absent. */
  dimensions: { [K in VariedKind]?: Record<string, ProfiledDimension> };
  /** What the run saw outside the catalogue (error bodies, status codes of refusals, RateLimit-Limit): information only, never pinned. */
  observations?: Record<string, unknown>;
}

export const CANNOT_MIMIC = 'the emulator cannot mimic this shape yet';

// ---- evidence -------------------------------------------------------------------------------------

/** What one answer says about one dimension: a variant, or a shape no variant makes (with the shape). */
type Evidence = { kind: VariedKind; dimension: string } & ({ variant: string } | { variant: null; example: unknown });

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);
const has = (value: Json, ...keys: string[]) => keys.every((key) => key in value);

/** Examples stay small: a profile is committed and read by people. */
export function sampleOf(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return value.length > 80 ? `${value.slice(0, 80)}…` : value;
  if (Array.isArray(value)) return depth >= 3 ? '[…]' : value.slice(0, 2).map((item) => sampleOf(item, depth + 1));
  if (isObject(value)) {
    if (depth >= 3) return '{…}';
    return Object.fromEntries(
      Object.entries(value)
        .slice(0, 8)
        .map(([key, item]) => [key, sampleOf(item, depth + 1)]),
    );
  }
  return value;
}

const variant = (kind: VariedKind, dimension: string, name: string | null, example?: unknown): Evidence =>
  name === null ? { kind, dimension, variant: null, example: sampleOf(example) } : { kind, dimension, variant: name };

/** The id forms of formatId (variation.ts): the emulator's `prefix_base64url`, a UUID, digits. */
function idForm(id: unknown): string | null {
  if (typeof id !== 'string') return null;
  if (/^[a-z]+_[A-Za-z0-9_-]+$/.test(id)) return 'prefixed';
  if (/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(id)) return 'uuid';
  if (/^[1-9]\d*$/.test(id)) return 'numeric';
  return null;
}
const ids = (kind: VariedKind, id: unknown): Evidence => variant(kind, 'ids', idForm(id), id);

/**
 * The element shape of `sources` (ask) or `citations` (research), told apart by the fields each variant has (an
 * unknown field added by extra_fields=unknown does not hide them). An empty array shows no shape: null.
 */
function elementShape(items: unknown[], shapes: Record<string, (item: Json) => boolean>): string | null | undefined {
  if (items.length === 0) return undefined;
  const first = items[0];
  if (typeof first === 'string') return 'strings';
  if (!isObject(first)) return null;
  for (const [name, fits] of Object.entries(shapes)) if (fits(first)) return name;
  return null;
}

const SOURCE_SHAPES: Record<string, (item: Json) => boolean> = {
  nested: (s) => isObject(s.record) && has(s, 'quote'),
  renamed: (s) => has(s, 'type', 'ref', 'name'),
  objects: (s) => has(s, 'kind', 'id', 'title'),
};
const CITATION_SHAPES: Record<string, (item: Json) => boolean> = {
  nested: (c) => isObject(c.document) && has(c, 'ref', 'quote'),
  renamed: (c) => has(c, 'source_id', 'name', 'file'),
  objects: (c) => has(c, 'id', 'title', 'file_name'),
};

/** Fields beyond `listed` present in `body`. */
const extraKeys = (body: Json, listed: readonly string[]) => Object.keys(body).filter((key) => !listed.includes(key));

function reportShape(report: unknown): string | null {
  if (typeof report === 'string') return 'markdown';
  if (isObject(report) && report.format === 'markdown' && typeof report.text === 'string') return 'markdown_object';
  if (Array.isArray(report) && report.every((s) => isObject(s) && has(s, 'heading', 'level', 'text'))) return 'sections';
  if (isObject(report) && Array.isArray(report.sections) && report.sections.every((s) => isObject(s) && has(s, 'heading', 'paragraphs')))
    return 'structured';
  return null;
}

function errorShape(error: unknown): string | null {
  if (typeof error === 'string') return 'string';
  if (!isObject(error)) return null;
  if (has(error, 'type', 'title', 'detail')) return 'problem';
  if (has(error, 'reason', 'details')) return 'renamed';
  if (has(error, 'code', 'message')) return 'code_message';
  return null;
}

const RUNNING: readonly string[] = CATALOGUE.research['status.running'];
const FAILED: readonly string[] = CATALOGUE.research['status.failed'];
/** Fields of GET /research/{job_id} the spec lists (2.5); the rest are the emulator's own, or unknown. */
const RESEARCH_LISTED = ['job_id', 'status', 'report', 'citations', 'error'];
const RESEARCH_EMULATOR = ['poll', 'question', 'created_at', 'finished_at'];
/** GET /training/{id}: the spec lists processing_step (2.6); a failed document's error is the emulator's in every variant. */
const DOCUMENT_LISTED = ['processing_step', 'error'];
const DOCUMENT_EMULATOR = ['document_id', 'file_name', 'title', 'size', 'created_at', 'indexed_at', 'url'];
/** The fields of each variant of POST /training (varyTrainingAccepted). */
const ACCEPTED_FIELDS = ['document_id', 'job_id', 'id', 'processing_step', 'status'];

function askEvidence(body: Json): Evidence[] {
  const out: Evidence[] = [ids('ask', body.message_id)];
  if (Array.isArray(body.sources)) {
    const shape = elementShape(body.sources, SOURCE_SHAPES);
    // `empty` is a variant of its own, but an empty list is also what any shape gives for a question without hits.
    out.push(
      shape === undefined ? { kind: 'ask', dimension: 'sources', variant: 'empty' } : variant('ask', 'sources', shape, body.sources),
    );
  }
  out.push({
    kind: 'ask',
    dimension: 'extra_fields',
    variant: extraKeys(body, ['answer', 'sources', 'message_id']).length ? 'unknown' : 'emulator',
  });
  return out;
}

function researchCreatedEvidence(body: Json): Evidence[] {
  const out: Evidence[] = [ids('research', body.job_id)];
  // No other fields here tells `emulator` from `spec_only`; only the poll does.
  if (extraKeys(body, ['job_id', 'status', 'poll']).length) out.push({ kind: 'research', dimension: 'extra_fields', variant: 'unknown' });
  return out;
}

function researchPollEvidence(body: Json): Evidence[] {
  const out: Evidence[] = [ids('research', body.job_id)];
  const status = body.status;
  const failed = (typeof status === 'string' && FAILED.includes(status)) || (body.error !== undefined && body.error !== null);
  if (failed) out.push(variant('research', 'status.failed', typeof status === 'string' && FAILED.includes(status) ? status : null, status));
  else if (status !== 'queued' && status !== 'succeeded')
    out.push(variant('research', 'status.running', typeof status === 'string' && RUNNING.includes(status) ? status : null, status));
  if (body.report !== undefined && body.report !== null) out.push(variant('research', 'report', reportShape(body.report), body.report));
  if (Array.isArray(body.citations)) {
    const shape = elementShape(body.citations, CITATION_SHAPES);
    if (shape !== undefined) out.push(variant('research', 'citations', shape, body.citations));
  }
  if (body.error !== undefined && body.error !== null) out.push(variant('research', 'error', errorShape(body.error), body.error));
  const nulls = ('report' in body && body.report === null) || ('error' in body && body.error === null);
  out.push({ kind: 'research', dimension: 'absent_fields', variant: nulls ? 'null' : 'omitted' });
  out.push(extraFields('research', body, RESEARCH_LISTED, RESEARCH_EMULATOR));
  return out;
}

function trainingAcceptedEvidence(body: Json): Evidence[] {
  const out: Evidence[] = [];
  const shape =
    'document_id' in body && 'job_id' in body
      ? 'emulator'
      : 'document_id' in body
        ? 'document_id'
        : 'job_id' in body
          ? 'job_id'
          : 'id' in body
            ? 'id'
            : null;
  out.push(variant('training', 'accepted', shape, body));
  out.push(ids('training', body.document_id ?? body.job_id ?? body.id));
  if (extraKeys(body, ACCEPTED_FIELDS).length) out.push({ kind: 'training', dimension: 'extra_fields', variant: 'unknown' });
  return out;
}

function trainingStatusEvidence(body: Json): Evidence[] {
  const out: Evidence[] = [];
  if ('document_id' in body) out.push(ids('training', body.document_id));
  out.push(extraFields('training', body, DOCUMENT_LISTED, DOCUMENT_EMULATOR));
  return out;
}

/** `extra_fields`: none beyond the spec's, only the emulator's own, or some it does not know. */
function extraFields(kind: VariedKind, body: Json, listed: readonly string[], emulators: readonly string[]): Evidence {
  const extra = extraKeys(body, listed);
  const shape = extra.length === 0 ? 'spec_only' : extra.every((key) => emulators.includes(key)) ? 'emulator' : 'unknown';
  return { kind, dimension: 'extra_fields', variant: shape };
}

function trainingUrlEvidence(body: Json): Evidence[] {
  const shape = 'document_id' in body && 'url' in body ? 'emulator' : 'url' in body ? 'url' : 'href' in body ? 'href' : null;
  const out: Evidence[] = [variant('training', 'url', shape, body)];
  if (extraKeys(body, ['document_id', 'url', 'href']).length) out.push({ kind: 'training', dimension: 'extra_fields', variant: 'unknown' });
  return out;
}

const EVIDENCE: Record<ObservedStep, (body: Json) => Evidence[]> = {
  ask: askEvidence,
  'research.created': researchCreatedEvidence,
  'research.poll': researchPollEvidence,
  'training.accepted': trainingAcceptedEvidence,
  'training.status': trainingStatusEvidence,
  'training.url': trainingUrlEvidence,
};

// ---- folding the evidence into dimensions ---------------------------------------------------------------

const key = (e: Evidence) => (e.variant === null ? `(${JSON.stringify(e.example)})` : e.variant);

/**
 * The rule where answers disagree (a server that varies, or one that changed during the run): the first answer
 * decides, and the note lists what later answers showed. One exception, where an answer shows less than another: an
 * empty `sources` list says `empty` only when every ask had one.
 */
function fold(evidence: Evidence[]): ProfiledDimension {
  const first = evidence[0]!;
  const others = [
    ...new Set(
      evidence
        .slice(1)
        .filter((e) => key(e) !== key(first))
        .map(key),
    ),
  ];
  const note = others.length ? `later answers showed: ${others.join(', ')}` : undefined;
  if (first.variant === null) return { variant: null, example: first.example, note: note ? `${CANNOT_MIMIC}; ${note}` : CANNOT_MIMIC };
  return note ? { variant: first.variant, note } : { variant: first.variant };
}

/** processing_step: the vocabulary holding the values seen, in the order they were seen (several hold `failed`). */
function foldSteps(values: unknown[]): ProfiledDimension {
  const vocabularies = Object.entries(PROCESSING_STEPS).map(([name, steps]) => [name, new Set(Object.values(steps))] as const);
  let candidates = vocabularies.filter(([, steps]) => steps.has(values[0] as string));
  if (candidates.length === 0) return { variant: null, example: sampleOf([...new Set(values)]), note: CANNOT_MIMIC };
  const outside: unknown[] = [];
  for (const value of values.slice(1)) {
    const narrower = candidates.filter(([, steps]) => steps.has(value as string));
    if (narrower.length) candidates = narrower;
    else if (!outside.includes(value)) outside.push(value);
  }
  const name = candidates[0]![0];
  return outside.length ? { variant: name, note: `later answers showed values outside it: ${outside.join(', ')}` } : { variant: name };
}

/** Observations to a profile: every dimension an answer showed, by the rules above; non-2xx answers show none. */
export function recordProfile(
  responses: readonly ObservedResponse[],
  meta: { server: string; recordedAt: string; observations?: Record<string, unknown> },
): VariantProfile {
  const seen = new Map<string, Evidence[]>();
  const steps: unknown[] = [];
  let finishedJob = false;
  for (const response of responses) {
    if (response.status < 200 || response.status > 299 || !isObject(response.body)) continue;
    const body = response.body;
    if ((response.step === 'training.accepted' || response.step === 'training.status') && 'processing_step' in body)
      steps.push(body.processing_step);
    if (response.step === 'research.poll' && (body.status === 'succeeded' || FAILED.includes(body.status as string))) finishedJob = true;
    for (const e of EVIDENCE[response.step](body)) {
      const at = `${e.kind}\0${e.dimension}`;
      seen.set(at, [...(seen.get(at) ?? []), e]);
    }
  }
  const dimensions: VariantProfile['dimensions'] = {};
  const put = (kind: VariedKind, dimension: string, profiled: ProfiledDimension) => {
    (dimensions[kind] ??= {})[dimension] = profiled;
  };
  for (const [kind, byDimension] of Object.entries(CATALOGUE) as [VariedKind, Record<string, readonly string[]>][]) {
    for (const dimension of Object.keys(byDimension)) {
      let evidence = seen.get(`${kind}\0${dimension}`);
      if (kind === 'ask' && dimension === 'sources' && evidence?.some((e) => e.variant !== 'empty'))
        evidence = evidence.filter((e) => e.variant !== 'empty');
      if (evidence?.length) put(kind, dimension, fold(evidence));
    }
  }
  // Spec 3.1: a job seen to finish with no status between queued and succeeded shows none (the catalogue's `queued`).
  if (finishedJob && !dimensions.research?.['status.running']) put('research', 'status.running', { variant: 'queued' });
  if (steps.length) put('training', 'processing_step', foldSteps(steps));
  return {
    version: 1,
    server: meta.server,
    recorded_at: meta.recordedAt,
    dimensions,
    ...(meta.observations ? { observations: meta.observations } : {}),
  };
}

// ---- reading a profile -------------------------------------------------------------------------------------

const PROFILE_FIELDS = ['version', 'server', 'recorded_at', 'dimensions', 'observations'];

/** Validates a parsed profile file; throws an Error whose message names the bad field (and the file is named by the caller). */
export function parseProfile(json: unknown): VariantProfile {
  const fail = (field: string, problem: string): never => {
    throw new Error(`${field} ${problem}`);
  };
  if (!isObject(json)) return fail('the profile', 'must be a JSON object');
  for (const field of Object.keys(json))
    if (!PROFILE_FIELDS.includes(field)) fail(field, `is not a field of a profile (${PROFILE_FIELDS.join(', ')})`);
  if (json.version !== 1) fail('version', `must be 1, not ${JSON.stringify(json.version)}`);
  if (typeof json.server !== 'string') fail('server', 'must be a string (the base URL that was checked)');
  if (typeof json.recorded_at !== 'string' || Number.isNaN(Date.parse(json.recorded_at))) fail('recorded_at', 'must be an ISO 8601 time');
  if (json.observations !== undefined && !isObject(json.observations)) fail('observations', 'must be an object');
  if (!isObject(json.dimensions)) return fail('dimensions', 'must be an object of kinds');
  const kinds = Object.keys(CATALOGUE);
  for (const [kind, byDimension] of Object.entries(json.dimensions)) {
    const catalogue = (CATALOGUE as Record<string, Record<string, readonly string[]>>)[kind];
    if (!catalogue) fail(`dimensions.${kind}`, `is not a kind that varies (${kinds.join(', ')})`);
    if (!isObject(byDimension)) fail(`dimensions.${kind}`, 'must be an object of dimensions');
    for (const [dimension, profiled] of Object.entries(byDimension as Json)) {
      const at = `dimensions.${kind}.${dimension}`;
      const variants = catalogue![dimension];
      if (!variants) fail(at, `is not a dimension of ${kind} (${Object.keys(catalogue!).join(', ')})`);
      if (!isObject(profiled)) fail(at, 'must be an object with a variant');
      const p = profiled as Json;
      if (p.note !== undefined && typeof p.note !== 'string') fail(`${at}.note`, 'must be a string');
      if (p.variant === null) {
        if (!('example' in p)) fail(`${at}.example`, 'is missing (a dimension without a variant keeps an example)');
        if (typeof p.note !== 'string') fail(`${at}.note`, 'is missing (a dimension without a variant says why)');
      } else if (typeof p.variant !== 'string') fail(`${at}.variant`, 'must be a string, or null for a shape the emulator cannot mimic');
      else if (!variants!.includes(p.variant))
        fail(`${at}.variant`, `"${p.variant}" is not a variant of ${kind}.${dimension} (${variants!.join(', ')})`);
    }
  }
  return json as unknown as VariantProfile;
}

/** What `serve --profile` pins: every dimension named by a variant. Those kept as an example (`variant: null`) are not pinned. */
export function pinsOf(profile: VariantProfile): PinnedChoices {
  const pins: Record<string, Record<string, string>> = {};
  for (const [kind, byDimension] of Object.entries(profile.dimensions))
    for (const [dimension, profiled] of Object.entries(byDimension ?? {}))
      if (profiled.variant !== null) (pins[kind] ??= {})[dimension] = profiled.variant;
  return pins;
}

/** The dimensions of a profile as `kind.dimension`, those pinned and those the emulator cannot mimic (for the ready line and banner). */
export function profileSummary(profile: VariantProfile): { pinned: string[]; not_pinned: string[] } {
  const pinned: string[] = [];
  const notPinned: string[] = [];
  for (const [kind, byDimension] of Object.entries(profile.dimensions))
    for (const [dimension, profiled] of Object.entries(byDimension ?? {}))
      (profiled.variant !== null ? pinned : notPinned).push(`${kind}.${dimension}`);
  return { pinned, not_pinned: notPinned };
}
