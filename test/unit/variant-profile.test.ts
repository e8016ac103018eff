/**
 * Issue 43.3: the profile a `conformance server` run records from what a server answered where the spec says "not
 * shown", and the check of a profile file. The classifier is the inverse of variation.ts, so the property runs over the
 * whole catalogue with variation.ts's own functions; the end-to-end test over HTTP is serve-profile.test.ts.
 */
import { describe, expect, it } from 'vitest';
import type { AskAnswer } from '../../src/core/resources/ask.js';
import { TRAINING_STEPS } from '../../src/core/resources/jobs.js';
import { selection, stallReport } from './helpers.js';
import { CANNOT_MIMIC, parseProfile, pinsOf, recordProfile, type ObservedResponse } from '../../src/core/emulation/variant-profile.js';
import {
  CATALOGUE,
  Variation,
  emulatorChoices,
  selectVariant,
  type VariantSelection,
  type VariedKind,
} from '../../src/core/emulation/variation.js';
import {
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
} from '../../src/core/resources/variants.js';

const KINDS = Object.keys(CATALOGUE) as VariedKind[];
const META = { server: 'https://api.example.test', recordedAt: '2026-11-28T04:00:00.000Z' };
const RANDOM = new Uint8Array(16).map((_, i) => i * 17 + 3);

const answer = (id: string): AskAnswer => ({
  answer: 'Der Hufschmied kommt alle sechs Wochen [1]. Weidegang ist ab Mai [2].',
  sources: [
    { kind: 'contacts', id: 'con-002', title: 'Josef Huber', snippet: 'Hufschmied, kommt alle sechs Wochen' },
    { kind: 'knowledge', id: 'kb-stall', title: 'Stallordnung', snippet: 'Weidegang ab Mai' },
  ],
  message_id: id,
});
const { report, citations } = stallReport();
const jobView = (id: string, status: ResearchJobView['status']): ResearchJobView => ({
  job_id: id,
  status,
  poll: `/research/${id}`,
  question: 'Weidegang',
  created_at: '2026-01-01T00:00:00.000Z',
  ...(status === 'succeeded' || status === 'failed' ? { finished_at: '2026-01-01T00:00:05.000Z' } : {}),
  ...(status === 'succeeded' ? { report, citations } : {}),
  ...(status === 'failed' ? { error: { code: 'no_sources', message: 'Keine Quellen.' } } : {}),
});
const docView = (id: string, step: TrainingDocumentView['processing_step']): TrainingDocumentView => ({
  document_id: id,
  file_name: 'a.md',
  title: 'A',
  size: 3,
  processing_step: step,
  created_at: '2026-01-01T00:00:00.000Z',
  ...(step === 'indexed' ? { indexed_at: '2026-01-01T00:00:09.000Z' } : {}),
  ...(step === 'failed' ? { error: { code: 'unreadable_content', message: 'kaputt' } } : {}),
  url: `/training/${id}/url`,
});

/** What a `conformance server` run sees of objects answered under `s`: every step of the kind, a failed job and document too. */
function answersUnder(s: VariantSelection): ObservedResponse[] {
  const ok = (step: ObservedResponse['step'], body: unknown, status = 200): ObservedResponse => ({ step, status, body });
  if (s.kind === 'ask') {
    const sel = s as VariantSelection<'ask'>;
    return [ok('ask', varyAskAnswer(answer(formatId(sel.choices.ids, 'msg', RANDOM)), sel))];
  }
  if (s.kind === 'research') {
    const sel = s as VariantSelection<'research'>;
    const id = formatId(sel.choices.ids, 'job', RANDOM);
    return [
      ok('research.created', varyResearchCreated({ job_id: id, status: 'queued', poll: `/research/${id}` }, sel), 202),
      ...(['queued', 'running', 'succeeded', 'failed'] as const).map((status) =>
        ok('research.poll', varyResearchJob(jobView(id, status), sel)),
      ),
    ];
  }
  const sel = s as VariantSelection<'training'>;
  const id = formatId(sel.choices.ids, 'doc', RANDOM);
  return [
    ok('training.accepted', varyTrainingAccepted(id, sel), 202),
    ...[...TRAINING_STEPS, 'failed' as const].map((step) => ok('training.status', varyTrainingDocument(docView(id, step), sel))),
    ok('training.url', varyTrainingUrl({ document_id: id, url: `http://127.0.0.1:4000/documents/${id}` }, sel)),
  ];
}

/** The profile's dimensions of a kind as `{ dimension: variant }`. */
const named = (responses: ObservedResponse[], kind: VariedKind) =>
  Object.fromEntries(Object.entries(recordProfile(responses, META).dimensions[kind] ?? {}).map(([d, p]) => [d, p.variant]));

describe('43.3 recordProfile: the inverse of --vary-unspecified', () => {
  it('43.3 for every kind, dimension and variant of the catalogue, the answers variation.ts shapes are named back as that variant', () => {
    let checked = 0;
    for (const kind of KINDS) {
      for (const [dimension, variants] of Object.entries(CATALOGUE[kind]) as Array<[string, readonly string[]]>) {
        for (const variant of variants) {
          const s = selection(kind, { [dimension]: variant });
          // The whole kind is named, not only the dimension that was set: the others are the emulator's own.
          expect(named(answersUnder(s), kind), `${kind}.${dimension}=${variant}`).toEqual(s.choices);
          checked++;
        }
      }
    }
    expect(checked).toBe(Object.values(CATALOGUE).reduce((n, dims) => n + Object.values(dims).flat().length, 0));
  });

  it('43.3 mixed selections, as a seed hands them out, are named back whole', () => {
    for (const seed of [0, 7, 42, 4_294_967_295])
      for (const kind of KINDS)
        for (let ordinal = 0; ordinal < 6; ordinal++) {
          const s = selectVariant(seed, kind, ordinal);
          expect(named(answersUnder(s), kind), `${seed} ${kind} #${ordinal}`).toEqual(s.choices);
        }
  });

  it('43.3 the profile has version 1, the server, the time, the observations given, and no dimension the run did not see', () => {
    const profile = recordProfile(answersUnder(selection('ask')), { ...META, observations: { 'RateLimit-Limit': '60' } });
    expect(profile).toMatchObject({
      version: 1,
      server: META.server,
      recorded_at: META.recordedAt,
      observations: { 'RateLimit-Limit': '60' },
    });
    expect(Object.keys(profile.dimensions)).toEqual(['ask']);
    expect(parseProfile(JSON.parse(JSON.stringify(profile)))).toEqual(profile);
  });

  it('43.3 status.running: a job that went from queued straight to succeeded shows none (queued); status.failed only from a failed job', () => {
    const polls = (...statuses: string[]): ObservedResponse[] =>
      statuses.map((status) => ({ step: 'research.poll', status: 200, body: { job_id: 'job_a', status } }));
    expect(recordProfile(polls('queued', 'queued', 'succeeded'), META).dimensions.research).toMatchObject({
      'status.running': { variant: 'queued' },
    });
    expect(recordProfile(polls('queued', 'succeeded'), META).dimensions.research?.['status.failed']).toBeUndefined();
    // Still queued at the end of the run: nothing is known about the status between.
    expect(recordProfile(polls('queued', 'queued'), META).dimensions.research?.['status.running']).toBeUndefined();
  });

  it('43.3 an empty sources list is a shape only when every ask had one: a question without hits is empty under any shape', () => {
    const ask = (sources: unknown[]): ObservedResponse => ({
      step: 'ask',
      status: 200,
      body: { answer: 'a', sources, message_id: 'msg_x' },
    });
    expect(recordProfile([ask([]), ask(['Wissensdatenbank „A“'])], META).dimensions.ask?.sources).toEqual({ variant: 'strings' });
    expect(recordProfile([ask([]), ask([])], META).dimensions.ask?.sources).toEqual({ variant: 'empty' });
  });

  it('43.3 answers that are not 2xx show no dimension (their bodies are observations of the caller)', () => {
    const profile = recordProfile([{ step: 'ask', status: 402, body: { type: 'about:blank', title: 'Payment Required' } }], META);
    expect(profile.dimensions).toEqual({});
  });
});

describe('43.3 recordProfile: shapes no variant makes', () => {
  const ask = (body: unknown): ObservedResponse => ({ step: 'ask', status: 200, body });

  it('43.3 an unknown shape keeps a small example and says the emulator cannot mimic it yet', () => {
    const profile = recordProfile(
      [
        ask({ answer: 'a', sources: [{ url: 'https://x', score: 0.5 }], message_id: 42 }),
        { step: 'research.poll', status: 200, body: { job_id: 'job_a', status: 'working' } },
        { step: 'research.poll', status: 200, body: { job_id: 'job_a', status: 'finished', report: 12, error: null } },
        { step: 'training.accepted', status: 202, body: { ticket: 'T-1', processing_step: 'accepted' } },
        { step: 'training.url', status: 200, body: { link: 'https://x' } },
      ],
      META,
    );
    expect(profile.dimensions.ask).toMatchObject({
      sources: { variant: null, example: [{ url: 'https://x', score: 0.5 }], note: CANNOT_MIMIC },
      ids: { variant: null, example: 42, note: CANNOT_MIMIC },
    });
    expect(profile.dimensions.research).toMatchObject({
      'status.running': { variant: null, example: 'working', note: expect.stringContaining(CANNOT_MIMIC) as unknown },
      report: { variant: null, example: 12, note: CANNOT_MIMIC },
    });
    // The second status is a disagreement too, named in the note.
    expect((profile.dimensions.research?.['status.running'] as { note: string }).note).toContain('"finished"');
    expect(profile.dimensions.training).toMatchObject({
      accepted: { variant: null, example: { ticket: 'T-1', processing_step: 'accepted' }, note: CANNOT_MIMIC },
      processing_step: { variant: null, example: ['accepted'], note: CANNOT_MIMIC },
      url: { variant: null, example: { link: 'https://x' }, note: CANNOT_MIMIC },
    });
  });

  it('43.3 examples are capped: long strings cut, two elements of an array, eight fields of an object, three levels deep', () => {
    const big = {
      answer: 'a',
      message_id: 'msg_x',
      sources: Array.from({ length: 50 }, (_, i) => ({
        text: 'x'.repeat(500),
        ...Object.fromEntries(Array.from({ length: 20 }, (_, j) => [`f${j}`, { deep: { deeper: { deepest: i } } }])),
      })),
    };
    const example = (recordProfile([ask(big)], META).dimensions.ask?.sources as { example: unknown[] }).example;
    expect(example).toHaveLength(2);
    expect(Object.keys(example[0] as object)).toHaveLength(8);
    expect(JSON.stringify(example).length).toBeLessThan(1000);
    expect((example[0] as { text: string }).text).toBe(`${'x'.repeat(80)}…`);
  });

  it('43.3 answers that disagree: the first decides, the note names what later ones showed', () => {
    const profile = recordProfile(
      [
        ask({ answer: 'a', sources: ['Kontakte „A“'], message_id: 'msg_a' }),
        ask({ answer: 'a', sources: [{ kind: 'contacts', id: 'c', title: 'A', snippet: 's' }], message_id: '123456789012345678' }),
      ],
      META,
    );
    expect(profile.dimensions.ask).toMatchObject({
      sources: { variant: 'strings', note: 'later answers showed: objects' },
      ids: { variant: 'prefixed', note: 'later answers showed: numeric' },
      extra_fields: { variant: 'emulator' },
    });
    const steps = recordProfile(
      ['received', 'splitting', 'indexed'].map((processing_step) => ({ step: 'training.status', status: 200, body: { processing_step } })),
      META,
    );
    expect(steps.dimensions.training?.processing_step).toEqual({
      variant: 'emulator',
      note: 'later answers showed values outside it: splitting',
    });
  });
});

describe('43.3 parseProfile: a profile file is checked before the emulator answers with it', () => {
  const good = () => ({
    version: 1,
    server: 'https://api.example.test',
    recorded_at: '2026-11-28T04:00:00.000Z',
    dimensions: {
      ask: { sources: { variant: 'strings' } },
      research: { 'status.running': { variant: 'in_progress', note: 'later answers showed: running' } },
      training: { accepted: { variant: null, example: { ticket: 1 }, note: CANNOT_MIMIC } },
    },
    observations: { 'RateLimit-Limit': '60' },
  });
  const refusal = (change: (p: Record<string, any>) => void): string => {
    const profile: Record<string, any> = good();
    change(profile);
    try {
      parseProfile(profile);
    } catch (error) {
      return (error as Error).message;
    }
    throw new Error('parseProfile accepted it');
  };

  it('43.3 a valid profile is returned as it is', () => {
    expect(parseProfile(good())).toEqual(good());
  });

  it('43.3 refusals name the field and what is wrong with it', () => {
    expect(() => parseProfile([])).toThrow('the profile must be a JSON object');
    expect(refusal((p) => (p.version = 2))).toBe('version must be 1, not 2');
    expect(refusal((p) => delete p.version)).toBe('version must be 1, not undefined');
    expect(refusal((p) => (p.server = 7))).toMatch(/^server must be a string/);
    expect(refusal((p) => (p.recorded_at = 'yesterday'))).toBe('recorded_at must be an ISO 8601 time');
    expect(refusal((p) => (p.dimension = {}))).toMatch(/^dimension is not a field of a profile/);
    expect(refusal((p) => (p.dimensions = []))).toBe('dimensions must be an object of kinds');
    expect(refusal((p) => (p.observations = 'x'))).toBe('observations must be an object');
    expect(refusal((p) => (p.dimensions.chat = {}))).toBe('dimensions.chat is not a kind that varies (ask, research, training)');
    expect(refusal((p) => (p.dimensions.ask = 'strings'))).toBe('dimensions.ask must be an object of dimensions');
    expect(refusal((p) => (p.dimensions.ask.shape = { variant: 'strings' }))).toBe(
      'dimensions.ask.shape is not a dimension of ask (sources, extra_fields, ids)',
    );
    expect(refusal((p) => (p.dimensions.ask.sources = 'strings'))).toBe('dimensions.ask.sources must be an object with a variant');
    expect(refusal((p) => (p.dimensions.ask.sources = { variant: 'links' }))).toBe(
      'dimensions.ask.sources.variant "links" is not a variant of ask.sources (objects, renamed, strings, nested, empty)',
    );
    expect(refusal((p) => (p.dimensions.ask.sources = { variant: 3 }))).toMatch(/^dimensions\.ask\.sources\.variant must be a string/);
    expect(refusal((p) => (p.dimensions.ask.sources = { variant: 'strings', note: 1 }))).toBe(
      'dimensions.ask.sources.note must be a string',
    );
    expect(refusal((p) => delete p.dimensions.training.accepted.example)).toMatch(/^dimensions\.training\.accepted\.example is missing/);
    expect(refusal((p) => delete p.dimensions.training.accepted.note)).toMatch(/^dimensions\.training\.accepted\.note is missing/);
  });
});

describe('43.3 a profile pins its dimensions (serve --profile)', () => {
  const profile = parseProfile({
    version: 1,
    server: 'https://api.example.test',
    recorded_at: '2026-11-28T04:00:00.000Z',
    dimensions: {
      ask: { sources: { variant: 'strings' } },
      research: { 'status.running': { variant: 'in_progress' } },
      training: { accepted: { variant: 'job_id' }, url: { variant: null, example: { link: 'x' }, note: CANNOT_MIMIC } },
    },
  });

  it("43.3 without --vary-unspecified: the pinned dimensions as observed, every other one the emulator's own, a null variant not pinned", () => {
    expect(pinsOf(profile)).toEqual({
      ask: { sources: 'strings' },
      research: { 'status.running': 'in_progress' },
      training: { accepted: 'job_id' },
    });
    const variation = new Variation(null, { name: 'service.json', pins: pinsOf(profile) });
    for (let i = 0; i < 3; i++) {
      expect(variation.next('ask').choices).toEqual({ ...emulatorChoices('ask'), sources: 'strings' });
      expect(variation.next('research').choices).toEqual({ ...emulatorChoices('research'), 'status.running': 'in_progress' });
      expect(variation.next('training').choices).toEqual({ ...emulatorChoices('training'), accepted: 'job_id' });
    }
  });

  it('43.3 with --vary-unspecified: the pinned dimensions stay, the others vary as before', () => {
    const pinned = new Variation(7, { name: 'service.json', pins: pinsOf(profile) });
    const free = new Variation(7);
    const seen = new Set<string>();
    for (let i = 0; i < 8; i++) {
      const a = pinned.next('ask');
      const b = free.next('ask');
      expect(a.choices).toEqual({ ...b.choices, sources: 'strings' });
      seen.add(a.choices.ids);
    }
    expect(seen.size).toBe(CATALOGUE.ask.ids.length);
  });

  it('43.3 the Agent-Access-Variant header names the profile as an RFC 8941 string, and the seed only under --vary-unspecified', () => {
    const alone = describeVariant(new Variation(null, { name: 'service.json', pins: pinsOf(profile) }).next('ask'));
    expect(alone).toMatch(/^profile="service\.json", ordinal=0, ask\.sources=strings, ask\.extra_fields=emulator, ask\.ids=prefixed$/);
    expect(describeVariant(new Variation(7, { name: 'a "b"\\ü.json', pins: {} }).next('ask'))).toMatch(
      /^seed=7, profile="a \\"b\\"\\\\\?\.json", ordinal=0, /,
    );
  });
});
