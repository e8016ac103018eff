/**
 * How answers and research reports are written from search hits: the one place that picks the passages, quotes
 * their sentences and numbers the sources. Pure and deterministic: the same question and hits give the same text.
 *
 * - Hits scoring below RELEVANCE × the best hit's score are dropped, and so are hits that have none of the question's
 *   words (stems, compounds also by their parts).
 * - A question whose words the remaining hits do not cover well enough (COVERAGE) is answered with nothing: no
 *   sentences, no sources (ask says "nichts gefunden", research fails `no_sources`).
 * - The answer starts with the best passage: the hit that covers most of the question's words, the better ranked of
 *   equals.
 * - The sentences of the remaining hits are scored by the question's words they carry (stemmed, stop words and
 *   question words left out); an answer quotes one to three of them, each followed by the number of its source.
 * - Sources are numbered in the order the text first cites them: `[1]` is the first element of `sources` (ask) or
 *   `citations` (research). Ask returns the cited sources only; a report cites every source it returns.
 */
import type { Citation } from './jobs.js';
import { searchText, type Analyzer, type Hit, type Term } from './search.js';

/**
 * A hit is relevant when its BM25 score is at least this share of the best hit's score. Absolute scores vary with
 * the question (more terms, higher scores) and the index, so the bar is relative. Observed over the fixtures (with
 * question words left out of the search): on-topic hits reach 0.31 to 1.0 of the best one (`Wann kommt der
 * Hufschmied?`: the guide 0.73, the letter with the dates 0.58, Josef Huber's contact 0.31; `Wie hoch ist die
 * Kaution?`: the Kautionsübersicht 0.75), while hits that share only a common word stay at 0.28 and below
 * (`Mustermann` for `Wer ist Georg Mustermann?`: 0.28; feeding times and stable rules for `Was kostet eine Box?`:
 * 0.21). The bar sits between the two. Before question words were left out, the Nebenkosten FAQ scored 0.66 for
 * the Hufschmied through `Wann` alone: no threshold separates that, which is why search.ts drops them.
 * A hit that shares no word with the question is never quoted, whatever its score.
 */
export const RELEVANCE = 0.3;

/**
 * The share of the question's words (stems of the words that carry meaning: question words and stop words left out)
 * that the relevant hits together must have for the question to be answered at all; else "nothing found". A compound
 * counts as had when a hit has it whole or has every one of its parts (`Boxenplatz`: `Box` and `Platz`, compounds.ts).
 * Two thirds: a question of two words needs both, of three words two, of four words three. Chosen on the evaluation
 * set (test/fixtures/retrieval-eval.json, docs/retrieval.md): off-topic questions share one common word with the
 * fixtures at most (`Wetter morgen in Berlin`: only `morgen`, as in `morgens`; `Flug nach Mallorca`: none),
 * while on-topic ones share all or all but one.
 */
export const COVERAGE = 2 / 3;

/** At most this many sentences in an answer or a report's summary. */
const MAX_SENTENCES = 3;
/** At most this many sentences quoted per source in a report's findings. */
const MAX_FINDING_SENTENCES = 3;
/** Two sentences sharing this share of the shorter one's words say the same; only the first is quoted. */
const SAME = 0.7;
/** Shorter than this many words is a lone word (a table cell, a tag), not a sentence to answer with. */
const MIN_WORDS = 2;

/** A sentence that can be quoted, with what it has of the question. */
interface Candidate {
  hit: Hit;
  /** The hit's place in the ranking and the sentence's place in the hit: the tie breakers. */
  rank: number;
  order: number;
  text: string;
  /** The question's terms in the sentence itself. */
  own: ReadonlySet<string>;
  /**
   * The weight of its own terms, plus half the weight of those only in the hit's title (the sentence is about them
   * without naming them, as `Nachtruhe gilt von 22 bis 6 Uhr` under `Ruhezeiten`).
   */
  score: number;
  /** The question's terms in the hit's title. */
  titled: ReadonlySet<string>;
}

/** What an answer is made of: the quoted sentences with their source numbers, and the sources in number order. */
export interface Composition {
  /** Each sentence with its number, ready to print: `… ab 8 Uhr [1].` */
  sentences: string[];
  /** The cited hits; `cited[n - 1]` is `[n]`. */
  cited: Hit[];
  /** Every relevant hit, best first (the cited ones among them). */
  relevant: Hit[];
}

/** The hits worth reading for this question: at least RELEVANCE of the best score. */
export const relevantHits = (hits: readonly Hit[]): Hit[] => {
  const best = hits[0]?.score ?? 0;
  return hits.filter((hit) => hit.score > 0 && hit.score >= best * RELEVANCE);
};

/** Whether two stems are the same word, or one the head of a compound or a longer form of the other (`kaution`, `kautionsubersicht`). */
const sameWord = (a: string, b: string): boolean => a === b || (Math.min(a.length, b.length) >= 4 && (a.startsWith(b) || b.startsWith(a)));

/** The question's terms in a text; e-mail addresses and links left out (`georg.mustermann@…` is no answer to who he is). */
function termsIn(analyze: Analyzer, text: string, terms: readonly string[]): Set<string> {
  const words = analyze(text.replace(/\S+@\S+|https?:\/\/\S+/g, ' '));
  return new Set(terms.filter((term) => words.some((word) => sameWord(word, term))));
}

const wordsOf = (text: string): Set<string> =>
  new Set(
    text
      .toLowerCase()
      .split(/[^\p{L}\p{N}]+/u)
      .filter((w) => w.length > 1),
  );

function sameSentence(a: string, b: string): boolean {
  const [x, y] = [wordsOf(a), wordsOf(b)];
  let shared = 0;
  for (const w of x) if (y.has(w)) shared++;
  return shared >= SAME * Math.min(x.size, y.size);
}

/** A record's value field as search.ts writes it: `Telefon: 0171 2345678`. */
const isValue = (text: string): boolean => /^[\p{L}-]+: /u.test(text);

/** Best first: the higher score, then the better hit, then within a hit prose before a value field, then earlier. */
const byStrength = (a: Candidate, b: Candidate): number =>
  b.score - a.score || a.rank - b.rank || Number(isValue(a.text)) - Number(isValue(b.text)) || a.order - b.order;

/**
 * Every sentence of the hits that has something of the question. A term weighs more the fewer of these sentences
 * carry it (inverse document frequency over the sentences), so `Ruhezeit` outweighs `Haus`, which half the house
 * rules mention.
 */
function candidates(hits: readonly Hit[], terms: readonly string[], analyze: Analyzer, price = false): Candidate[] {
  const sentences = hits.flatMap((hit, rank) => {
    const titled = termsIn(analyze, hit.title, terms);
    return hit.sentences
      .map((text, order) => ({ hit, rank, order, text, own: termsIn(analyze, text, terms), titled }))
      .filter((s) => s.text.split(/\s+/).length >= MIN_WORDS);
  });
  const weight = new Map(terms.map((t) => [t, Math.log(1 + sentences.length / Math.max(1, sentences.filter((s) => s.own.has(t)).length))]));
  const sum = (ts: Iterable<string>) => [...ts].reduce((total, t) => total + weight.get(t)!, 0);
  // Asked for a price, a sentence with an amount is worth one more of the question's words.
  const amount = price ? Math.max(0, ...weight.values()) : 0;
  return sentences
    .map((s) => ({ ...s, score: sum(s.own) + sum([...s.titled].filter((t) => !s.own.has(t))) / 2 }))
    .filter((c) => c.score > 0)
    .map((c) => (namesAmount(c.text) ? { ...c, score: c.score + amount } : c))
    .sort(byStrength);
}

/**
 * The sentences that answer: the strongest one of the best passage; then up to two more that carry a term of the
 * question the chosen ones do not, or (the second only) one from another source with all of the first one's terms. When
 * even the strongest names none of the question's words itself (the hit matched by its title, e.g. a section
 * `Fütterungszeiten`), the first sentences of that passage.
 */
function pick(all: Candidate[], best: Hit): Candidate[] {
  const first = all.find((c) => c.hit === best) ?? all[0];
  if (!first) return [];
  if (first.own.size === 0) return all.filter((c) => c.hit === first.hit).slice(0, MAX_SENTENCES);
  const chosen = [first];
  // A term the title of a quoted source names is answered already (`Huber` once Josef Huber's phone is quoted).
  const covered = new Set([...first.own, ...first.titled]);
  for (const c of all) {
    if (chosen.length === MAX_SENTENCES) break;
    if (c === first) continue;
    if (c.own.size === 0 || chosen.some((p) => sameSentence(p.text, c.text))) continue;
    const adds = [...c.own].some((t) => !covered.has(t));
    // A second source saying the same in other words (often with more detail) is worth one more sentence, not two.
    const alsoSays = chosen.length === 1 && [...first.own].every((t) => c.own.has(t)) && c.hit !== first.hit;
    if (!adds && !alsoSays) continue;
    chosen.push(c);
    for (const t of [...c.own, ...c.titled]) covered.add(t);
  }
  return chosen;
}

/** Kinds whose fields are notes that leave out what they are about (`Kommt alle 7 Wochen …`): the record's title leads. */
const NOTES: ReadonlySet<string> = new Set(['contacts', 'animals', 'places', 'listings']);

/**
 * The sentence as the answer says it. A record's value field names its record (`Anna Schmidt, Telefon: 0171 …`),
 * and so does a note that does not name it itself (`Josef Huber: Kommt alle 7 Wochen …`). A task's title is a to-do,
 * not what a sentence is about: it is named as the task (`Zur Aufgabe „Kaution Andreas Maier abrechnen“ ist notiert:
 * …`), never put in front of the sentence as if it were part of the answer (issue 45.2).
 */
function quoted(c: Candidate): string {
  // A letter's first sentence after its salutation (`…, hiermit kündige ich …`) starts in lower case.
  const text = c.text.charAt(0).toUpperCase() + c.text.slice(1);
  if (c.hit.kind === 'knowledge' || text.toLowerCase().includes(c.hit.title.toLowerCase())) return text;
  const value = isValue(text) && !c.hit.sentences.slice(0, c.order).some((s) => !isValue(s));
  if (c.hit.kind === 'work_items') return value ? `Aufgabe „${c.hit.title}“, ${text}` : `Zur Aufgabe „${c.hit.title}“ ist notiert: ${text}`;
  if (value) return `${c.hit.title}, ${text}`;
  return NOTES.has(c.hit.kind) ? `${c.hit.title}: ${text}` : text;
}

/** The sentence with its source number before the closing punctuation: `… ab 8 Uhr [1].` */
function numbered(text: string, n: number): string {
  const end = /[?!]$/.test(text) ? text.slice(-1) : '.';
  return `${text.replace(/[\s.:;,?!]+$/, '')} [${n}]${end}`;
}

const keyOf = (hit: Hit) => `${hit.kind}|${hit.id}|${hit.title}`;

/** Numbers the hits in the order they are first cited, and writes each chosen sentence with its number. */
function cite(chosen: Candidate[]): { sentences: string[]; cited: Hit[] } {
  const cited: Hit[] = [];
  const numbers = new Map<string, number>();
  const sentences = chosen.map((c) => {
    const key = keyOf(c.hit);
    if (!numbers.has(key)) {
      cited.push(c.hit);
      numbers.set(key, cited.length);
    }
    return numbered(quoted(c), numbers.get(key)!);
  });
  return { sentences, cited };
}

/** The most letters by which two stems of one word differ where the stemmer left an ending (`gehor`, `gehort`). */
const ENDING = 3;

/**
 * Whether a set of stems has `stem`: the same, the same word with an ending the stemmer left (`gehor` for `gehort`),
 * or a participle's stem without its `ge-` (`gepruft`: `pruft`). A longer word that starts with it is another word
 * (`fruhjahrsimpf` is no `fruhjahr`): its parts count, as compounds (`partStems`).
 */
function holds(stems: ReadonlySet<string>, stem: string): boolean {
  if (stems.has(stem) || (stem.startsWith('ge') && stem.length >= 6 && stems.has(stem.slice(2)))) return true;
  // Four letters are too few to tell an ending from another word (`kund` is no `kundig`: Kunden, Kündigung).
  if (stem.length < 5) return false;
  for (const s of stems)
    if (Math.abs(s.length - stem.length) <= ENDING && Math.min(s.length, stem.length) >= 5 && sameWord(s, stem)) return true;
  return false;
}

/** How a hit has a stem: 1 as a word of its own, ½ only inside one of its compounds (`Tag` in `Tagesbedarf`), else 0. */
const weight = (hit: Hit, stem: string): number => (holds(hit.stems, stem) ? 1 : holds(hit.partStems, stem) ? 0.5 : 0);

/** How much of `term` a hit has: the term itself, else the mean of its parts (`Boxenplatz`: `Box` 1, `Platz` ½). */
function had(hit: Hit, term: Term): number {
  const whole = weight(hit, term.stem);
  if (whole === 1 || term.parts.length === 0) return whole;
  return Math.max(whole, term.parts.reduce((sum, p) => sum + weight(hit, p), 0) / term.parts.length);
}

/** Whether a hit has `term` at all: itself, or every one of its parts, as words or inside compounds. */
const hasTerm = (hit: Hit, term: Term): boolean =>
  weight(hit, term.stem) > 0 || (term.parts.length > 0 && term.parts.every((p) => weight(hit, p) > 0));

/** The question's words that carry meaning, each once. */
const contentTerms = (question: string, analyze: Analyzer): Term[] => {
  const seen = new Set<string>();
  return analyze.terms(searchText(question)).filter((t) => !seen.has(t.stem) && seen.add(t.stem));
};

/** The answer to a question from its hits (best first): the sentences to say, and the sources they cite. */
export function compose(question: string, hits: readonly Hit[], analyze: Analyzer): Composition {
  const nothing = { sentences: [], cited: [], relevant: [] };
  const content = contentTerms(question, analyze);
  if (content.length === 0) return nothing;
  // Coverage is judged over every hit found, not only the relevant ones: `Wann beginnt das Anweiden?` is answered from
  // the task `Anweiden vorbereiten`, though only a letter far below it says `beginnt`.
  const covered = content.filter((t) => hits.some((hit) => hasTerm(hit, t)));
  if (covered.length < COVERAGE * content.length) return nothing;
  const relevant = relevantHits(hits).filter((hit) => content.some((t) => had(hit, t) > 0));
  if (relevant.length === 0) return nothing;
  const price = asksPrice(question);
  const terms = [...new Set(analyze(searchText(question)))];
  const all = candidates(relevant, terms, analyze, price);
  // The best passage: most of the question's words (then most of them as words of its own, then, asked for a price,
  // one that names an amount, then the one with a sentence that says more of them at once), the better ranked of
  // equals (relevant is best first).
  const strength = (hit: Hit): number[] => [
    content.reduce((sum, t) => sum + had(hit, t), 0),
    content.filter((t) => weight(hit, t.stem) === 1).length,
    price && hit.sentences.some(namesAmount) ? 1 : 0,
    Math.max(0, ...all.filter((c) => c.hit === hit).map((c) => c.own.size)),
  ];
  const strengths = new Map(relevant.map((hit) => [hit, strength(hit)]));
  const best = relevant.reduce((a, b) => (stronger(strengths.get(b)!, strengths.get(a)!) ? b : a));
  const { sentences, cited } = cite(pick(all, best));
  return { sentences, cited, relevant };
}

/** Whether `a` is greater than `b`, compared element by element. */
function stronger(a: readonly number[], b: readonly number[]): boolean {
  const i = a.findIndex((x, j) => x !== b[j]);
  return i >= 0 && a[i]! > b[i]!;
}

/** A question that asks what something costs or how much it is: the sentence that names an amount answers it. */
const asksPrice = (question: string): boolean => /(?<!\p{L})(?:kostet|kosten|teuer|preis|wie\s+hoch|wie\s+viel)/iu.test(question);
const namesAmount = (sentence: string): boolean => /\d\s*(?:EUR|€)/.test(sentence);

// ---- research report (spec 2.5) ----------------------------------------------------------------

/**
 * The German Markdown report of a research job: `## Zusammenfassung` (the answer, as ask would give it),
 * `## Ergebnisse` (per source the sentences that carry the question's words) and `## Quellen`, with the same
 * numbers throughout. The sources the summary cites come first, then the other relevant ones, best first.
 * Null when no hit is relevant (the job then fails for want of sources).
 */
export function composeReport(
  question: string,
  hits: readonly Hit[],
  analyze: Analyzer,
  files: ReadonlyMap<string, string>,
): { report: string; citations: Citation[] } | null {
  const { sentences, cited, relevant } = compose(question, hits, analyze);
  const seen = new Set<string>();
  const sources = [...cited, ...relevant].filter((hit) => !seen.has(keyOf(hit)) && seen.add(keyOf(hit)));
  if (sources.length === 0) return null;
  const terms = [...new Set(analyze(searchText(question)))];
  const findings = sources.map((hit, i) => {
    const carrying = hit.sentences.filter((s) => termsIn(analyze, s, terms).size > 0).slice(0, MAX_FINDING_SENTENCES);
    const passage = carrying.length > 0 ? carrying.join(' ') : hit.snippet;
    return `### ${hit.title} [${i + 1}]\n\n${passage}`;
  });
  const summary =
    sentences.length > 0
      ? sentences.join(' ')
      : `Die Wissensdatenbank enthält ${sources.length === 1 ? 'eine Quelle' : `${sources.length} Quellen`} zu dieser Frage; die ` +
        `Stellen stehen unter „Ergebnisse“.`;
  const report = [
    `# Recherche: ${question}`,
    '## Zusammenfassung',
    summary,
    '## Ergebnisse',
    findings.join('\n\n'),
    '## Quellen',
    sources.map((hit, i) => `${i + 1}. ${hit.title} (${files.get(hit.id) ?? hit.id})`).join('\n'),
  ].join('\n\n');
  const citations = sources.map((hit) => ({ id: hit.id, title: hit.title, file_name: files.get(hit.id) ?? hit.id, snippet: hit.snippet }));
  return { report, citations };
}
