/**
 * How answers and research reports are written from search hits (src/core/resources/compose.ts, docs/serve.md "The REST allowlist", docs/retrieval.md): quoted
 * sentences with numbered references, relevance threshold, nothing-found, report sections, determinism. Over the
 * shipped fixtures, searched as the emulator searches them.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { composeAnswer } from '../../src/core/resources/ask.js';
import { issueTokensWithoutConsent } from '../../src/core/oauth/issue-tokens.js';
import { authenticate } from '../../src/core/oauth/resource-guard.js';
import { ResourceService } from '../../src/core/resources/resource-service.js';
import { RELEVANCE, relevantHits } from '../../src/core/resources/compose.js';
import { SearchIndex } from '../../src/core/resources/search.js';
import { markdownSentences, splitProse } from '../../src/core/resources/sentences.js';
import { loadFixtures } from '../../src/loaders/fixtures.js';
import { fixturesRetrieval, openCore } from './helpers.js';

let retrieval: Awaited<ReturnType<typeof fixturesRetrieval>>;
beforeAll(async () => {
  retrieval = await fixturesRetrieval();
});
const ask = (question: string) => retrieval.ask(question);
const research = (question: string) => retrieval.research(question);

/** The reference numbers an answer or report uses, in order of appearance, each once. */
const numbersIn = (text: string): number[] => [...new Set([...text.matchAll(/\[(\d+)\]/g)].map((m) => Number(m[1])))];

describe('ask composes a short German answer from the best passages', () => {
  it('"Wann kommt der Hufschmied?" answers with the sentence that says mittwochs ab 8 Uhr, citing [1] first', async () => {
    const { answer, sources } = await ask('Wann kommt der Hufschmied?');
    const [first] = answer.split(/(?<=\]\.) /);
    expect(first).toMatch(/Hufschmied .*kommt .*mittwochs ab 8 Uhr \[1\]\.$/);
    expect(sources[0]).toMatchObject({ kind: 'knowledge', title: expect.stringContaining('Hufschmied') });
    expect(answer).not.toContain('Folgendes gefunden');
    // One to three sentences, no snippet list.
    expect(answer.match(/\[\d+\][.?!]/g)!.length).toBeGreaterThanOrEqual(1);
    expect(answer.match(/\[\d+\][.?!]/g)!.length).toBeLessThanOrEqual(3);
    expect(answer).not.toMatch(/^- /m);
  });

  it('an off-topic hit is not among the sources: no Nebenkostenabrechnung for the Hufschmied', async () => {
    const { answer, sources } = await ask('Wann kommt der Hufschmied?');
    expect(sources.map((s) => s.title).join(' | ')).not.toMatch(/Nebenkosten/);
    expect(answer).not.toMatch(/Nebenkosten/);
  });

  it('the numbers match the sources: [n] is sources[n - 1], numbered in order of first citation, and every source is cited', async () => {
    for (const question of [
      'Wann kommt der Hufschmied?',
      'Wie hoch ist die Kaution?',
      'Wann wird der Müll abgeholt?',
      'Wann ist die nächste Kotprobe?',
      'Wie lange ist die Kündigungsfrist?',
    ]) {
      const { answer, sources } = await ask(question);
      expect(sources.length, question).toBeGreaterThan(0);
      expect(numbersIn(answer), question).toEqual(sources.map((_, i) => i + 1));
    }
  });

  it('a nonsense question gives the plain nothing-found answer with empty sources', async () => {
    for (const question of ['Quantenchromodynamik Gluonen', 'Wann?', 'Wer ist es?']) {
      expect(await ask(question)).toEqual({
        answer: 'Dazu habe ich in Ihrem Arbeitsbereich und Ihrer Wissensdatenbank nichts gefunden.',
        sources: [],
      });
    }
  });

  it('the same question over the same index gives the same answer text and sources', async () => {
    const a = await ask('Wann kommt der Hufschmied?');
    const b = await ask('Wann kommt der Hufschmied?');
    expect(b).toEqual(a);
    // Also from a fresh index over the same fixtures (nothing depends on insertion timing or the cache).
    const fixtures = await loadFixtures();
    const fresh = new SearchIndex(fixtures.workspace, fixtures.knowledge);
    const hits = await fresh.search('Wann kommt der Hufschmied?', { person: 'person_erika', limit: 8 });
    expect(composeAnswer('Wann kommt der Hufschmied?', hits, 'http://127.0.0.1/mcp', await fresh.analyzer())).toEqual(a);
  });

  it('a section matched by its heading alone is quoted from its first sentences (Ruhezeiten: Nachtruhe …)', async () => {
    const { answer, sources } = await ask('Wann ist die Ruhezeit im Haus?');
    expect(answer).toMatch(/^Nachtruhe gilt von 22 bis 6 Uhr/);
    expect(sources).toEqual([expect.objectContaining({ title: expect.stringContaining('Ruhezeiten') })]);
  });
});

describe('the relevance threshold', () => {
  it(`drops hits below ${RELEVANCE} of the best score, keeps the rest in their order`, () => {
    const hit = (score: number) => ({
      kind: 'knowledge' as const,
      id: `k${score}`,
      title: 't',
      snippet: 's',
      score,
      sentences: [],
      stems: new Set<string>(),
      partStems: new Set<string>(),
    });
    const hits = [hit(10), hit(5), hit(RELEVANCE * 10), hit(RELEVANCE * 10 - 0.01), hit(1)];
    expect(relevantHits(hits).map((h) => h.score)).toEqual([10, 5, RELEVANCE * 10]);
    expect(relevantHits([])).toEqual([]);
  });
});

describe('research reports: Zusammenfassung, Ergebnisse, Quellen with the same numbers as citations', () => {
  it('the report has the three sections in order, and its numbers match citations', async () => {
    const { report, citations } = (await research('Wie läuft der Weidegang und wann kommt der Hufschmied?'))!;
    const headings = report.split('\n').filter((line) => line.startsWith('## '));
    expect(headings).toEqual(['## Zusammenfassung', '## Ergebnisse', '## Quellen']);
    expect(report).toMatch(/^# Recherche: Wie läuft der Weidegang und wann kommt der Hufschmied\?\n/);
    const summary = report.slice(report.indexOf('## Zusammenfassung'), report.indexOf('## Ergebnisse'));
    expect(summary).toMatch(/mittwochs ab 8 Uhr \[1\]\./);
    // Every citation is cited, numbered in order; the Quellen list names each under its number.
    expect(numbersIn(report)).toEqual(citations.map((_, i) => i + 1));
    const sources = report.slice(report.indexOf('## Quellen'));
    citations.forEach((c, i) => expect(sources).toContain(`${i + 1}. ${c.title} (${c.file_name})`));
    const findings = report.slice(report.indexOf('## Ergebnisse'), report.indexOf('## Quellen'));
    citations.forEach((c, i) => expect(findings).toContain(`### ${c.title} [${i + 1}]`));
  });

  it('a question the knowledge base has nothing on writes no report', async () => {
    expect(await research('Quantenchromodynamik Gluonen')).toBeNull();
  });

  it('the same question over the same index gives the same report', async () => {
    expect(await research('Wie läuft der Weidegang?')).toEqual(await research('Wie läuft der Weidegang?'));
  });
});

describe('sentences an answer can quote', () => {
  it('prose splits at sentence ends, not after abbreviations, ordinals or inside dates', () => {
    expect(splitProse('Tierärztin Dr. Anna Berger kommt am 3. Februar. Termin 2026-04-22. Danach z. B. Impfung.')).toEqual([
      'Tierärztin Dr. Anna Berger kommt am 3. Februar.',
      'Termin 2026-04-22.',
      'Danach z. B. Impfung.',
    ]);
  });

  it('Markdown: list items stand alone, table rows read as sentences, emphasis is dropped', () => {
    const md = 'Text **fett**.\n\n- Punkt eins\n- Punkt zwei\n\n| Leistung | Preis |\n|---|---|\n| Barhuf | 45 EUR |';
    expect(markdownSentences(md)).toEqual(['Text fett.', 'Punkt eins', 'Punkt zwei', 'Barhuf: 45 EUR']);
  });
});

describe('answers are made once per question and index', () => {
  it('the same question is composed once; an indexed document makes it compose again; callers get copies', async () => {
    const fixtures = await loadFixtures();
    const own = new SearchIndex(fixtures.workspace, fixtures.knowledge);
    let made = 0;
    const derive = () =>
      own.derive('ask', 'Wann kommt der Hufschmied?', { person: 'person_erika', limit: 8 }, (hits, analyzeWith) => {
        made++;
        return composeAnswer('Wann kommt der Hufschmied?', hits, 'http://127.0.0.1/mcp', analyzeWith);
      });
    const first = await derive();
    first.sources.length = 0;
    const second = await derive();
    expect(made).toBe(1);
    expect(second.sources.length).toBeGreaterThan(0);
    await own.addKnowledge({ ...fixtures.knowledge[0]!, id: 'kb-neu', owner: 'person_erika' });
    await derive();
    expect(made).toBe(2);
  });
});

describe('research reports are written once per question, hits and index', () => {
  it('spec 2.5: jobs of one question read the knowledge base as it stood when each finished, settled together or not', async () => {
    const { core, clock } = await openCore();
    const fixtures = await loadFixtures();
    const resources = new ResourceService(core, {
      workspace: fixtures.workspace,
      knowledge: fixtures.knowledge,
      sleep: () => ({ done: new Promise(() => undefined), cancel: () => undefined }),
      timings: { researchQueueMs: 1_000, researchRunMs: 4_000, trainingStepMs: 500 },
    });
    const tokens = await issueTokensWithoutConsent(core, { scopes: ['research', 'training.write'] });
    const access = await authenticate(core, `Bearer ${tokens.access_token}`, null);
    const question = 'Wann kommt der Hufschmied?';
    // A finishes at 5 s, before the document is indexed (4 s + 4 steps of 0.5 s = 6 s); B at 7 s, after it; C as A.
    const a = String((await resources.startResearch(access, question)).value.job_id);
    const c = String((await resources.startResearch(access, question)).value.job_id);
    clock.advance(2_000);
    const b = String((await resources.startResearch(access, question)).value.job_id);
    clock.advance(2_000);
    const doc = await resources.startTraining(
      access,
      'hufschmied-neu.md',
      '# Neuer Hufschmied\n\nDer neue Hufschmied kommt ab April jeden Freitag.',
    );
    clock.advance(4_000);
    // One settle moves all three: the document is indexed first, then each job filters what it could have read.
    expect(await resources.settle()).toBe(true);
    const job = (id: string) => core.repo.get('research_jobs', id)!;
    const cites = (id: string) => (job(id).citations ?? []).map((x) => x.id);
    expect(job(a).status).toBe('succeeded');
    expect(cites(a)).not.toContain(doc.value.document_id);
    expect(cites(b)).toContain(doc.value.document_id);
    expect(job(b).report).toContain('Der neue Hufschmied kommt ab April jeden Freitag');
    expect(job(c).report).toBe(job(a).report);
    expect(job(c).citations).toEqual(job(a).citations);
  });
});
