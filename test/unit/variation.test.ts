/**
 * The pure module behind `serve --vary-unspecified` (docs/emulator-control.md "Varying what the spec leaves open"): the catalogue, how variants are assigned, and
 * the transforms from the emulator's canonical answers. The end-to-end test over HTTP is vary-unspecified.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { FINISHED_STEPS } from '../../src/cli/commands/api.js';
import type { AskAnswer } from '../../src/core/resources/ask.js';
import { TRAINING_STEPS } from '../../src/core/resources/jobs.js';
import { selection, stallReport } from './helpers.js';
import { CATALOGUE, Variation, checkSeed, selectVariant, type Choices, type VariedKind } from '../../src/core/emulation/variation.js';
import {
  PROCESSING_STEPS,
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

const answer: AskAnswer = {
  answer: 'Der Hufschmied kommt alle sechs Wochen [1]. Weidegang ist ab Mai [2].',
  sources: [
    { kind: 'contacts', id: 'con-002', title: 'Josef Huber', snippet: 'Hufschmied, kommt alle sechs Wochen' },
    { kind: 'knowledge', id: 'kb-stall', title: 'Stallordnung', snippet: 'Weidegang ab Mai' },
  ],
  message_id: 'msg_abc',
};
const { report, citations } = stallReport();
const jobView = (status: ResearchJobView['status']): ResearchJobView => ({
  job_id: 'job_1',
  status,
  poll: '/research/job_1',
  question: 'Weidegang',
  created_at: '2026-01-01T00:00:00.000Z',
  ...(status === 'succeeded' || status === 'failed' ? { finished_at: '2026-01-01T00:00:05.000Z' } : {}),
  ...(status === 'succeeded' ? { report, citations } : {}),
  ...(status === 'failed' ? { error: { code: 'no_sources', message: 'Keine Quellen.' } } : {}),
});
const docView = (step: TrainingDocumentView['processing_step']): TrainingDocumentView => ({
  document_id: 'doc_1',
  file_name: 'a.md',
  title: 'A',
  size: 3,
  processing_step: step,
  created_at: '2026-01-01T00:00:00.000Z',
  ...(step === 'failed' ? { error: { code: 'unreadable_content', message: 'kaputt' } } : {}),
  url: '/training/doc_1/url',
});

describe('the variation catalogue and how variants are assigned', () => {
  it('the first variant of every dimension is what the emulator answers without the mode, byte for byte', () => {
    expect(JSON.stringify(varyAskAnswer(answer, selection('ask')))).toBe(JSON.stringify(answer));
    for (const status of ['queued', 'running', 'succeeded', 'failed'] as const) {
      expect(JSON.stringify(varyResearchJob(jobView(status), selection('research')))).toBe(JSON.stringify(jobView(status)));
    }
    const created = { job_id: 'job_1', status: 'queued' as const, poll: '/research/job_1' };
    expect(JSON.stringify(varyResearchCreated(created, selection('research')))).toBe(JSON.stringify(created));
    for (const step of [...TRAINING_STEPS, 'failed'] as const)
      expect(JSON.stringify(varyTrainingDocument(docView(step), selection('training')))).toBe(JSON.stringify(docView(step)));
    expect(varyTrainingAccepted('doc_1', selection('training'))).toEqual({
      document_id: 'doc_1',
      job_id: 'doc_1',
      processing_step: 'received',
      status: '/training/doc_1',
    });
    expect(varyTrainingUrl({ document_id: 'doc_1', url: 'http://x/documents/doc_1' }, selection('training'))).toEqual({
      document_id: 'doc_1',
      url: 'http://x/documents/doc_1',
    });
  });

  it('round-robin from the seed: any run of consecutive ordinals as long as a dimension shows each of its variants once', () => {
    for (const seed of [0, 1, 42, 4_294_967_295]) {
      for (const kind of KINDS) {
        for (const [dimension, variants] of Object.entries(CATALOGUE[kind]) as Array<[string, readonly string[]]>) {
          for (const start of [0, 7]) {
            const seen = Array.from(
              { length: variants.length },
              (_, i) => (selectVariant(seed, kind, start + i).choices as Record<string, string>)[dimension],
            );
            expect(new Set(seen), `${seed} ${kind}.${dimension}`).toEqual(new Set(variants));
          }
        }
      }
    }
  });

  it('the same seed gives the same sequence; another seed starts elsewhere; each kind counts on its own', () => {
    const run = (seed: number) => {
      const v = new Variation(seed);
      return [v.next('ask'), v.next('research'), v.next('ask'), v.next('training'), v.next('research')].map(describeVariant);
    };
    expect(run(7)).toEqual(run(7));
    expect(run(7)).not.toEqual(run(8));
    const v = new Variation(7);
    v.next('ask');
    v.next('ask');
    expect(v.next('research').ordinal).toBe(0);
    expect(v.next('ask').ordinal).toBe(2);
  });

  it('describeVariant is an RFC 8941 dictionary of tokens naming the seed, the ordinal and every dimension of the kind', () => {
    const text = describeVariant(selectVariant(42, 'research', 3));
    const members = text.split(', ');
    for (const member of members) expect(member).toMatch(/^[a-z*][a-z0-9_.*-]*=(?:\d+|[A-Za-z*][A-Za-z0-9:/!#$%&'*+.^_`|~-]*)$/);
    expect(members.slice(0, 2)).toEqual(['seed=42', 'ordinal=3']);
    expect(members.slice(2).map((m) => m.split('=')[0])).toEqual(Object.keys(CATALOGUE.research).map((d) => `research.${d}`));
  });

  it('seeds are whole numbers from 0 to 2^32-1 (the flag form: test/unit/flags.test.ts)', () => {
    expect(checkSeed(0)).toBe(0);
    expect(checkSeed(4_294_967_295)).toBe(4_294_967_295);
    for (const bad of [-1, 1.5, 4_294_967_296]) expect(() => checkSeed(bad), String(bad)).toThrow(RangeError);
    expect(() => checkSeed(Number.NaN)).toThrow(RangeError);
    expect(() => new Variation(-1)).toThrow(RangeError);
  });

  it('ids: the emulator’s prefixed form, a v4 UUID, or 18 digits', () => {
    const random = new Uint8Array(16).fill(255);
    expect(formatId('prefixed', 'job', random)).toMatch(/^job_[A-Za-z0-9_-]{16}$/);
    expect(formatId('uuid', 'job', random)).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(formatId('numeric', 'job', random)).toMatch(/^[1-9]\d{17}$/);
    expect(formatId('numeric', 'job', new Uint8Array(16))).toMatch(/^[1-9]\d{17}$/);
  });
});

describe('every variant keeps what the spec promises', () => {
  it('ask (spec 2.4): answer a string, sources an array, message_id a string, in each sources shape and with unknown fields', () => {
    const shapes = new Map<string, unknown[]>();
    for (const sources of CATALOGUE.ask.sources) {
      for (const extra_fields of CATALOGUE.ask.extra_fields) {
        const body = varyAskAnswer(answer, selection('ask', { sources, extra_fields }));
        expect(body).toMatchObject({ answer: answer.answer, sources: expect.any(Array), message_id: 'msg_abc' });
        if (extra_fields === 'emulator') shapes.set(sources, body.sources as unknown[]);
        else expect(Object.keys(body).filter((k) => !['answer', 'sources', 'message_id'].includes(k))).toHaveLength(2);
      }
    }
    expect(shapes.get('renamed')).toEqual([
      expect.objectContaining({ type: 'contacts', ref: 'con-002', name: 'Josef Huber' }),
      expect.anything(),
    ]);
    expect(shapes.get('strings')).toEqual(['Kontakt „Josef Huber“', 'Wissensdatenbank „Stallordnung“']);
    expect(shapes.get('nested')).toEqual([
      { record: { kind: 'contacts', id: 'con-002', title: 'Josef Huber' }, quote: expect.any(String) },
      expect.anything(),
    ]);
    expect(shapes.get('empty')).toEqual([]);
  });

  it('research (spec 2.5, 3.1): queued and succeeded stay; running and failed take unlisted values; report, citations once succeeded; error when failed', () => {
    for (let ordinal = 0; ordinal < 60; ordinal++) {
      const s = selectVariant(ordinal * 31, 'research', ordinal);
      expect(varyResearchJob(jobView('queued'), s).status).toBe('queued');
      expect(varyResearchJob(jobView('running'), s).status).toBe(s.choices['status.running']);
      const done = varyResearchJob(jobView('succeeded'), s);
      expect(done).toMatchObject({ job_id: 'job_1', status: 'succeeded', citations: expect.any(Array) });
      expect(done.report).toBeDefined();
      expect(done.report).not.toBeNull();
      const failed = varyResearchJob(jobView('failed'), s);
      expect(failed.status).toBe(s.choices['status.failed']);
      expect(['queued', 'succeeded']).not.toContain(failed.status);
      expect(failed.error).toBeDefined();
      expect(failed.error).not.toBeNull();
    }
  });

  it('report: Markdown, {format, text}, an array of sections, or a structured object; all carry the same text', () => {
    const shapes = Object.fromEntries(
      CATALOGUE.research.report.map((r) => [r, varyResearchJob(jobView('succeeded'), selection('research', { report: r })).report]),
    );
    expect(shapes.markdown).toBe(report);
    expect(shapes.markdown_object).toEqual({ format: 'markdown', text: report });
    expect(shapes.sections).toEqual(
      expect.arrayContaining([
        { heading: 'Recherche: Weidegang', level: 1, text: '' },
        { heading: 'Zusammenfassung', level: 2, text: 'Weidegang ab Mai [1].' },
      ]),
    );
    expect(shapes.structured).toMatchObject({
      title: 'Recherche: Weidegang',
      sections: expect.arrayContaining([{ heading: 'Quellen', paragraphs: ['1. Stallordnung (stall.md)'] }]),
    });
  });

  it('citations and error in each shape; absent fields as null; spec_only drops what the spec does not list, unknown adds fields', () => {
    const c = (citations: Choices<'research'>['citations']) =>
      varyResearchJob(jobView('succeeded'), selection('research', { citations })).citations;
    expect(c('renamed')).toEqual([{ source_id: 'kb-stall', name: 'Stallordnung', file: 'stall.md', excerpt: 'Weidegang ab Mai' }]);
    expect(c('strings')).toEqual(['Stallordnung (stall.md)']);
    expect(c('nested')).toEqual([
      { ref: 1, document: { id: 'kb-stall', title: 'Stallordnung', file_name: 'stall.md' }, quote: 'Weidegang ab Mai' },
    ]);
    const e = (error: Choices<'research'>['error']) => varyResearchJob(jobView('failed'), selection('research', { error })).error;
    expect(e('string')).toBe('Keine Quellen.');
    expect(e('problem')).toEqual({ type: 'urn:agent-access:error:no_sources', title: 'no_sources', detail: 'Keine Quellen.' });
    expect(e('renamed')).toEqual({ reason: 'no_sources', details: { message: 'Keine Quellen.' } });
    expect(varyResearchJob(jobView('running'), selection('research', { absent_fields: 'null' }))).toMatchObject({
      report: null,
      citations: [],
      error: null,
    });
    expect(varyResearchJob(jobView('succeeded'), selection('research', { extra_fields: 'spec_only' }))).toEqual({
      job_id: 'job_1',
      status: 'succeeded',
      report,
      citations,
    });
    const unknown = varyResearchJob(jobView('succeeded'), selection('research', { extra_fields: 'unknown' }));
    expect(Object.keys(unknown).filter((k) => !(k in jobView('succeeded')))).toHaveLength(2);
    expect(Object.keys((unknown.citations as object[])[0]!).filter((k) => k.startsWith('x_'))).toHaveLength(1);
  });

  it('unknown fields are stable for one object and differ between objects; their names are none a client could know', () => {
    const names = (ordinal: number) =>
      Object.keys(varyResearchJob(jobView('queued'), selection('research', { extra_fields: 'unknown' }, ordinal))).slice(5);
    expect(names(3)).toEqual(names(3));
    expect(names(3)).not.toEqual(names(4));
    for (const name of names(3)) expect(name).toMatch(/^(x_[0-9a-f]{6}|[a-z]+_[0-9a-f]{6})$/);
  });

  it('training (spec 2.6, 4.4): the 202 carries a top-level job id; processing_step in each vocabulary ends in a word the CLI takes as done', () => {
    for (const accepted of CATALOGUE.training.accepted) {
      const body = varyTrainingAccepted('doc_1', selection('training', { accepted }));
      expect([body.document_id, body.job_id, body.id]).toContain('doc_1');
    }
    for (const vocabulary of CATALOGUE.training.processing_step) {
      const steps = PROCESSING_STEPS[vocabulary];
      expect(FINISHED_STEPS.has(steps.indexed)).toBe(true);
      for (const step of TRAINING_STEPS.slice(0, -1)) expect(FINISHED_STEPS.has(steps[step])).toBe(false);
      const failed = varyTrainingDocument(
        docView('failed'),
        selection('training', { processing_step: vocabulary, extra_fields: 'spec_only' }),
      );
      expect(failed).toEqual({ processing_step: steps.failed, error: { code: 'unreadable_content', message: 'kaputt' } });
    }
    expect(varyTrainingUrl({ document_id: 'd', url: 'u' }, selection('training', { url: 'href' }))).toEqual({ href: 'u' });
    expect(varyTrainingUrl({ document_id: 'd', url: 'u' }, selection('training', { url: 'url' }))).toEqual({ url: 'u' });
  });
});
