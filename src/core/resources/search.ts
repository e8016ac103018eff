import { textOf } from '../../protocol/format.js';
import { sha256 } from '../state/crypto.js';
import { fieldLabel } from './actions.js';
import { MAX_WORD, MIN_PART, splitCompound } from './compounds.js';
import { markdownSentences } from './sentences.js';
import type { KnowledgeDocument, Workspace, WorkspaceKind, WorkspaceRecord } from './workspace.js';
import { KIND_LABELS, WORKSPACE_KINDS, markdownSections, recordText } from './workspace.js';

/** Where a hit comes from: a workspace kind, or the knowledge base. */
export type SourceKind = WorkspaceKind | 'knowledge';

/** Spec 2.4 `sources` element (shape not shown in the spec; documented in the README). */
export interface Source {
  kind: SourceKind;
  id: string;
  title: string;
  snippet: string;
}

/** A search hit: the source, its BM25 score, and the sentences of the passage for an answer to quote (compose.ts). */
export interface Hit extends Source {
  score: number;
  sentences: readonly string[];
  /** The stems of the passage's words (title and text): what its coverage of a question is judged by. */
  stems: ReadonlySet<string>;
  /** The stems of the parts of its compounds (`pferd`, `box` for `Pferdebox`). */
  partStems: ReadonlySet<string>;
}

/** A word of a question that carries meaning: its stem, and the stems of its parts when it is a compound (compounds.ts). */
export interface Term {
  stem: string;
  parts: readonly string[];
}

/**
 * The stems of a text's words that carry meaning (stop words left out), in order, each compound followed by the
 * stems of its parts: what answers match sentences by. `terms` gives the same words one by one with their parts.
 */
export interface Analyzer {
  (text: string): string[];
  terms(text: string): Term[];
}

interface Entry {
  id: string;
  kind: string;
  /** `shared`, or the person a training document belongs to: nobody else finds it. */
  owner: string;
  ref: string;
  title: string;
  /** Whitespace runs collapsed to one space: indexed as is, and cut into snippets without another pass. */
  text: string;
  /** `text` in lower case, to find the question's words in (not indexed; stored beside the document). */
  lower: string;
  /** The passage cut into sentences an answer can quote (not indexed either). */
  sentences: string[];
  /** What a hit stands for: a record, or a section of a document, however many pieces it was indexed in. */
  passage: string;
  /** The written parts of the compounds in title and text (`pferd box` for `Pferdebox`), indexed so that parts find them. */
  parts: string;
  /** The stems of the words of title and text, and of the parts of their compounds (not indexed). */
  stems: string[];
  partStems: string[];
}

/** An entry from its parts, with the text prepared once for indexing, snippets and answers. */
function entry(
  id: string,
  kind: string,
  owner: string,
  ref: string,
  title: string,
  text: string,
  sentences: string[],
  passage = id,
): Entry {
  const flat = text.replace(/\s+/g, ' ').trim();
  return { id, kind, owner, ref, title, text: flat, lower: flat.toLowerCase(), sentences, passage, parts: '', stems: [], partStems: [] };
}

/** Record fields written as prose; the others are values, quoted with their label (`Telefon: 0171 2345678`). */
const PROSE_FIELDS: ReadonlySet<string> = new Set(['notes', 'description', 'summary', 'content', 'body']);

/** A workspace record's entry: its fields' text, each prose field cut into sentences, each value field one labelled line. */
const recordEntry = (kind: WorkspaceKind, record: WorkspaceRecord): Entry =>
  entry(
    `${kind}:${record.id}`,
    kind,
    SHARED,
    record.id,
    record.title,
    recordText(record),
    Object.entries(record)
      .filter(([key]) => key !== 'id' && key !== 'title')
      .flatMap(([key, value]) => {
        const text = textOf(value).trim();
        if (text === '') return [];
        return PROSE_FIELDS.has(key) ? markdownSentences(text) : [`${fieldLabel(kind, key)}: ${text.replace(/\s+/g, ' ')}`];
      }),
  );

/**
 * Words that shape a question rather than say what it is about: question words, and phrases such as `wie lange`
 * or `gibt es`. Left out of the search (the German stop words leave them in), or `Wann kommt der Hufschmied?`
 * finds every passage that asks `Wann …?` itself, and `wie lange` finds Birgit Lang. `nächste` stems to `nach`.
 */
const NOISE_WORDS = [
  String.raw`wie\s+(?:lange|oft|hoch|viele?|weit|spät|früh|groß|läuft|laufen)`,
  'wann',
  'wer',
  'wen',
  'wem',
  'wessen',
  'warum',
  'weshalb',
  'wieso',
  'wozu',
  'wodurch',
  'womit',
  'wofür',
  'worüber',
  'wohin',
  'woher',
  'welche[rsmn]?',
  'gibt',
  'heißt',
  'heisst',
  'kostet',
  'nächste[nrsm]?',
  'bitte',
  'mache',
  'machen',
  'macht',
  'tun',
  'tue',
];
const QUESTION_NOISE = new RegExp(String.raw`(?<![\p{L}\p{N}])(?:` + NOISE_WORDS.join('|') + String.raw`)(?![\p{L}\p{N}])`, 'giu');

/** The question as searched: without the words that only make it a question. */
export const searchText = (question: string): string => question.replace(QUESTION_NOISE, ' ').replace(/\s+/g, ' ').trim();

type Orama = typeof import('@orama/orama');
type Db = ReturnType<Orama['create']>;
interface Loaded {
  orama: Orama;
  db: Db;
  analyze: Analyzer;
  /** The stems of every indexed word: what compounds are split against (compounds.ts). */
  vocabulary: Vocabulary;
}

const SNIPPET = 220;
/**
 * The most text indexed in one turn of the event loop, and so the most one entry holds, in UTF-16 units. Orama
 * indexes a batch in one go, and hostile text (long compound words, each a new token) takes longest, so a 256 KiB
 * training document is indexed in slices and holds up no request for longer than one (docs/bench.md "Run N1":
 * the ingest of a training document).
 */
export const ENTRY_TEXT = 8 * 1024;
/** Distinct questions whose ranked hits are kept (see SearchIndex.#answers). */
const ANSWER_CACHE_SIZE = 1_000;
const SHARED = 'shared';

/**
 * Full-text search over the workspace and the knowledge base with Orama: German tokenizer, stemmer and stop
 * words, BM25 scoring. Orama is loaded and the index built by warmUp after the ready line (or on first use); a search waits for it.
 * Knowledge documents are indexed per `##` section so a hit points at the passage that answers.
 */
export class SearchIndex {
  #ready: Promise<Loaded> | undefined;
  /** What `#ready` was shared by (SharedIndexes): an index that may be shared is never changed. Null: this one's own. */
  #shared: SharedEntry | null = null;
  readonly #workspace: Workspace;
  #knowledge: KnowledgeDocument[];
  #added: KnowledgeDocument[] = [];
  /**
   * Answers by question and filter, dropped whenever the index changes: the same question over the same index
   * ranks the same, so it is ranked once (agents and test suites ask the same questions again and again).
   */
  readonly #answers = new Map<string, Hit[]>();
  /** What is made from hits (an ask's composed answer, a research report), kept and dropped as the hits are. */
  readonly #derived = new Map<string, unknown>();

  constructor(workspace: Workspace, knowledge: KnowledgeDocument[]) {
    this.#workspace = workspace;
    this.#knowledge = knowledge;
  }

  warmUp(): Promise<unknown> {
    return this.#index();
  }

  /** Starts over from the workspace (as it is now) and these documents: the state was replaced (a snapshot restore). */
  rebuild(knowledge: KnowledgeDocument[]): void {
    this.#knowledge = knowledge;
    this.#added = [];
    this.#ready = undefined;
    if (this.#shared) this.#shared.holders--;
    this.#shared = null;
    this.#forget();
  }

  #index(): Promise<Loaded> {
    if (this.#ready) return this.#ready;
    const documents = [...this.#knowledge, ...this.#added];
    const shared = sharedIndexes.take(this.#workspace, documents);
    this.#shared = shared?.entry ?? null;
    return (this.#ready = shared?.loaded ?? buildIndex(this.#workspace, documents));
  }

  /**
   * Before a change to an index that may be shared: true when it is this one's to change in place (no other emulator
   * took it); else the shared one is left to the others, and this one is built anew, its own from then on, from the
   * workspace as it is now (a changed record in it) and the documents with `adding`.
   */
  async #changeInPlace(adding?: KnowledgeDocument): Promise<boolean> {
    const shared = this.#shared;
    if (shared === null) return true;
    this.#shared = null;
    if (sharedIndexes.takeOver(shared)) return true;
    if (adding) this.#added.push(adding);
    this.#ready = buildIndex(this.#workspace, [...this.#knowledge, ...this.#added]);
    this.#forget();
    await this.#ready;
    return false;
  }

  /** The built index this one searches, for tests to see which emulators share one. */
  built(): Promise<object> {
    return this.#index();
  }

  /** The index changed: every ranking and what was made from one may now differ. */
  #forget(): void {
    this.#answers.clear();
    this.#derived.clear();
  }

  /**
   * What `make` builds from a question's hits, built once per question, filter and index as the ranking is (making it
   * is deterministic, and costs more than the ranking: an ask's answer quotes sentences scored against the question).
   * `label` names what is made and everything else it depends on. Callers get copies.
   */
  derive<T>(
    label: string,
    question: string,
    options: { person: string; limit?: number; knowledgeOnly?: boolean },
    make: (hits: Hit[], analyze: Analyzer) => T,
  ): Promise<T> {
    const key = JSON.stringify([label, question, options.person, options.limit ?? 5, options.knowledgeOnly === true]);
    return this.memo(key, async (analyze) => make(await this.search(question, options), analyze));
  }

  /**
   * What `make` builds from the index, built once per `key` and index: `key` must name everything else the value
   * depends on (a research report: its question and the hits it was written from). Callers get copies.
   */
  async memo<T>(key: string, make: (analyze: Analyzer) => T | Promise<T>): Promise<T> {
    const index = this.#index();
    const { analyze } = await index;
    if (this.#derived.has(key)) return structuredClone(this.#derived.get(key) as T);
    const value = await make(analyze);
    // Kept only if the index it came from is still the current one (a restore may have replaced it meanwhile).
    if (index === this.#ready) {
      if (this.#derived.size >= ANSWER_CACHE_SIZE) this.#derived.delete(this.#derived.keys().next().value!);
      this.#derived.set(key, value);
    }
    return structuredClone(value);
  }

  /** The analyzer search uses (the German stemmer and stop words), once the index is loaded. */
  async analyzer(): Promise<Analyzer> {
    return (await this.#index()).analyze;
  }

  /** Makes a knowledge document findable (a training document once indexed). */
  async addKnowledge(doc: KnowledgeDocument): Promise<void> {
    if (!this.#ready) {
      this.#added.push(doc);
      return;
    }
    if (!(await this.#changeInPlace(doc))) return; // an index of its own, built with the document
    const { orama, db, vocabulary } = await this.#index();
    try {
      await learnInSlices(vocabulary, knowledgeEntries(doc));
      await insertInSlices(orama, db, knowledgeEntries(doc), vocabulary);
    } finally {
      // Also after a failure part way: the index may have changed.
      this.#forget();
    }
  }

  /** Re-indexes one workspace record after a change (the workspace object itself was already changed). */
  async putRecord(kind: WorkspaceKind, record: { id: string; title: string; [field: string]: unknown }): Promise<void> {
    if (!this.#ready) return; // indexed from the changed workspace when first used
    if (!(await this.#changeInPlace())) return; // built from the changed workspace
    const { orama, db, vocabulary } = await this.#index();
    const id = `${kind}:${record.id}`;
    const remove = orama.remove as unknown as (db: Db, id: string) => unknown;
    const insert = orama.insert as unknown as (db: Db, doc: Entry) => unknown;
    try {
      remove(db, id);
      const changed = recordEntry(kind, record);
      vocabulary.learn(`${changed.title} ${changed.text}`);
      insert(db, prepared(changed, vocabulary));
    } finally {
      this.#forget();
    }
  }

  /**
   * Best hits first, among what `person` may see: the shared workspace and knowledge base and the person's own
   * training documents. `knowledgeOnly` searches the knowledge base alone (research reads no workspace data, spec 2.7).
   */
  async search(question: string, options: { person: string; limit?: number; knowledgeOnly?: boolean }): Promise<Hit[]> {
    const index = this.#index();
    const loaded = await index;
    const { analyze } = loaded;
    const key = JSON.stringify([question, options.person, options.limit ?? 5, options.knowledgeOnly === true]);
    const known = this.#answers.get(key);
    // Copies: a caller may change what it gets without changing the next caller's answer.
    if (known) return known.map((hit) => ({ ...hit }));
    // A question of question words and stop words alone asks about nothing (and Orama would rank everything for it).
    const hits = analyze(searchText(question)).length === 0 ? [] : this.#rank(loaded, question, options);
    // Kept only if the index it came from is still the current one (a restore may have replaced it meanwhile).
    if (index === this.#ready) {
      if (this.#answers.size >= ANSWER_CACHE_SIZE) this.#answers.delete(this.#answers.keys().next().value!);
      this.#answers.set(key, hits);
    }
    return hits.map((hit) => ({ ...hit }));
  }

  #rank({ orama, db, vocabulary }: Loaded, question: string, options: { person: string; limit?: number; knowledgeOnly?: boolean }): Hit[] {
    // Orama's generic result types are too deep for tsc here; the shape is its documented search result.
    const search = orama.search as unknown as (
      db: Db,
      params: Record<string, unknown>,
    ) => { hits: Array<{ score: number; document: Entry }> };
    const limit = options.limit ?? 5;
    // The parts of the question's compounds are searched too (`Boxenplatz`: also `boxen platz`), in title, text and
    // the parts of the passage's own compounds (`Pferdebox`: `pferd box`).
    const asked = searchText(question);
    const words = asked.toLowerCase().split(/[^\p{L}\p{N}]+/u);
    const term = [asked, ...words.flatMap((w) => vocabulary.parts(w))].join(' ');
    const rank = (count: number) =>
      search(db, {
        term,
        properties: ['title', 'text', 'parts'],
        boost: { title: 2 },
        limit: count,
        where: { owner: { in: [SHARED, options.person] }, ...(options.knowledgeOnly ? { kind: { eq: 'knowledge' } } : {}) },
      }).hits;
    // A long section is indexed in pieces (ENTRY_TEXT), each a hit of its own: a passage counts once, at its best
    // piece, and more hits are asked for while pieces of one passage take the places of others.
    type Ranked = Array<{ score: number; document: Entry }>;
    const distinct = (count: number): Ranked => {
      const hits = rank(count);
      const seen = new Set<string>();
      const passages = hits.filter(({ document }) => !seen.has(document.passage) && seen.add(document.passage));
      return passages.length >= limit || hits.length < count ? passages : distinct(count * 4);
    };
    const passages = distinct(limit * 2);
    const placing = questionWords(question);
    return passages.slice(0, limit).map(({ score, document }) => ({
      kind: document.kind as SourceKind,
      id: document.ref,
      title: document.title,
      snippet: snippet(document, placing),
      score,
      sentences: document.sentences,
      stems: new Set(document.stems),
      partStems: new Set(document.partStems),
    }));
  }
}

/**
 * The index of a workspace and knowledge documents: Orama loaded, every word learnt, every entry inserted. Built after
 * the ready line, so it must not hold up the requests that do not need it: a slice at a time. Every word is known
 * before the first compound is split, so a passage splits the same whatever its place in the index.
 */
async function buildIndex(workspace: Workspace, documents: readonly KnowledgeDocument[]): Promise<Loaded> {
  const [orama, { stemmer, language }, { stopwords }] = await Promise.all([
    import('@orama/orama'),
    import('@orama/stemmers/german'),
    import('@orama/stopwords/german'),
  ]);
  const db = orama.create({
    schema: { kind: 'enum', owner: 'enum', ref: 'string', title: 'string', text: 'string', parts: 'string' } as const,
    components: { tokenizer: { stemming: true, stemmer, language, stopWords: stopwords } },
  });
  function* entries(): Generator<Entry> {
    for (const kind of WORKSPACE_KINDS) for (const record of workspace[kind]) yield recordEntry(kind, record);
    for (const doc of documents) yield* knowledgeEntries(doc);
  }
  const vocabulary = new Vocabulary(stemmer, new Set(stopwords));
  await learnInSlices(vocabulary, entries());
  await insertInSlices(orama, db, entries(), vocabulary);
  return { orama, db, analyze: analyzer(vocabulary), vocabulary };
}

/**
 * An index as shared: collected once no emulator searches it (a WeakRef once built); `holders` counts the emulators
 * that took it and have not let go of it (a restore, or a change of their own).
 */
interface SharedEntry {
  key: string;
  held: WeakRef<Loaded> | Promise<Loaded>;
  holders: number;
}

/** Beyond this much text in documents an index is not shared: the key is a hash of it all, made in one turn of the loop. */
const SHARE_TEXT_LIMIT = 1024 * 1024;
/** Beyond this many workspace records neither (fixtures of one's own). */
const SHARE_RECORD_LIMIT = 5_000;

/**
 * Indexes by what they were built from, for as long as an emulator of this process searches one. A conformance run
 * or a test file starts emulator after emulator on the same fixtures, and each built the same index again, about a
 * quarter of a second of CPU (docs/retrieval.md). Searching changes nothing a search sees: the vocabulary's caches of
 * stems and splits give the same answers whatever is in them. An index is changed only by an emulator that holds it
 * alone (a serve's; takeOver); the others build one of their own first (SearchIndex.#changeInPlace).
 */
class SharedIndexes {
  readonly #byKey = new Map<string, SharedEntry>();
  readonly #collected = new FinalizationRegistry<string>((key) => {
    const entry = this.#byKey.get(key);
    if (entry?.held instanceof WeakRef && entry.held.deref() === undefined) this.#byKey.delete(key);
  });

  /** The index of this content, built or being built, or a new build; null when content this large is not shared. */
  take(workspace: Workspace, documents: readonly KnowledgeDocument[]): { entry: SharedEntry; loaded: Promise<Loaded> } | null {
    const text = documents.reduce((sum, doc) => sum + doc.content.length, 0);
    const records = WORKSPACE_KINDS.reduce((sum, kind) => sum + workspace[kind].length, 0);
    if (text > SHARE_TEXT_LIMIT || records > SHARE_RECORD_LIMIT) return null;
    const content = JSON.stringify([workspace, documents]);
    const key = sha256(content);
    const entry = this.#byKey.get(key);
    const loaded = entry?.held instanceof WeakRef ? entry.held.deref() : entry?.held;
    if (entry && loaded) {
      entry.holders++;
      return { entry, loaded: Promise.resolve(loaded) };
    }
    // Built from a copy: the build takes many turns of the event loop, and the workspace may change meanwhile.
    const [copy, copies] = JSON.parse(content) as [Workspace, KnowledgeDocument[]];
    const building = buildIndex(copy, copies);
    const fresh: SharedEntry = { key, held: building, holders: 1 };
    this.#byKey.set(key, fresh);
    building.then(
      (built) => {
        // Not if taken over meanwhile: it may be changing, and no one else may take it.
        if (this.#byKey.get(key) === fresh) fresh.held = new WeakRef(built);
        this.#collected.register(built, key);
      },
      () => {
        if (this.#byKey.get(key) === fresh) this.#byKey.delete(key);
      },
    );
    return { entry: fresh, loaded: building };
  }

  /** Makes the index an emulator's own to change, when no other took it; else lets go of it (false). */
  takeOver(entry: SharedEntry): boolean {
    if (entry.holders > 1) {
      entry.holders--;
      return false;
    }
    if (this.#byKey.get(entry.key) === entry) this.#byKey.delete(entry.key);
    return true;
  }
}

const sharedIndexes = new SharedIndexes();

/**
 * Inserts `entries` a slice of at most ENTRY_TEXT of text per turn of the event loop (and makes each entry in the
 * turn that inserts it), so other requests go on meanwhile.
 */
async function insertInSlices(orama: Orama, db: Db, entries: Iterator<Entry>, vocabulary: Vocabulary): Promise<void> {
  const budget = { splits: 0 };
  for await (const slice of slices(entries)) {
    for (const e of slice) await splitInTurns(e, vocabulary, budget);
    await orama.insertMultiple(
      db,
      slice.map((e) => prepared(e, vocabulary)),
    );
  }
}

/**
 * Compounds split anew per turn of the event loop at most. Each split may cost MAX_TRIES look-ups (compounds.ts), and
 * a slice of hostile text is nothing but such words: split in one turn with its insert, it held up requests.
 */
export const SPLITS_PER_TURN = 48;

/** Splits the compounds of `e` into the vocabulary's cache ahead of its insert, a turn of the event loop at a time. */
async function splitInTurns(e: Entry, vocabulary: Vocabulary, budget: { splits: number }): Promise<void> {
  for (const word of vocabulary.words(analysedText(e))) {
    if (!vocabulary.splitsAnew(word)) continue;
    vocabulary.parts(word);
    if (++budget.splits < SPLITS_PER_TURN) continue;
    budget.splits = 0;
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** What of an entry is analysed: a record's sentences name its value fields (`Telefon: 0171 …`), which a question for the `Telefonnummer` has. */
const analysedText = (e: Entry): string => (e.kind === 'knowledge' ? `${e.title} ${e.text}` : `${e.title} ${e.sentences.join(' ')}`);

/** Learns the words of `entries` a slice at a time, as insertInSlices indexes them. */
async function learnInSlices(vocabulary: Vocabulary, entries: Iterator<Entry>): Promise<void> {
  for await (const slice of slices(entries)) for (const e of slice) vocabulary.learn(`${e.title} ${e.text}`);
}

/** `entries` in slices of at most ENTRY_TEXT of text, the next one a turn of the event loop later. */
async function* slices(entries: Iterator<Entry>): AsyncGenerator<Entry[]> {
  let next = entries.next();
  while (!next.done) {
    const slice = [next.value];
    let size = next.value.text.length;
    while (!(next = entries.next()).done && size + next.value.text.length <= ENTRY_TEXT) {
      slice.push(next.value);
      size += next.value.text.length;
    }
    yield slice;
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** The entry with the parts of its compounds (indexed) and its stems (for coverage), from the current vocabulary. */
function prepared(e: Entry, vocabulary: Vocabulary): Entry {
  const text = analysedText(e);
  const parts = new Set<string>();
  const stems = new Set<string>();
  const partStems = new Set<string>();
  for (const word of vocabulary.words(text)) {
    stems.add(vocabulary.stem(word));
    for (const part of vocabulary.parts(word)) {
      parts.add(part);
      partStems.add(vocabulary.stem(part));
    }
  }
  return { ...e, parts: [...parts].join(' '), stems: [...stems], partStems: [...partStems] };
}

/** A knowledge document's entries: one per `##` section, a long section in pieces of at most ENTRY_TEXT. */
function* knowledgeEntries(doc: KnowledgeDocument): Generator<Entry> {
  let i = 0;
  for (const [s, section] of markdownSections(doc).entries()) {
    const title = section.heading === doc.title ? doc.title : `${doc.title}: ${section.heading}`;
    const passage = `knowledge:${doc.id}:section:${s}`;
    for (const text of pieces(section.text))
      yield entry(`knowledge:${doc.id}:${i++}`, 'knowledge', doc.owner ?? SHARED, doc.id, title, text, markdownSentences(text), passage);
  }
}

/**
 * `text` cut into pieces of at most ENTRY_TEXT: after the last paragraph or sentence end in a piece's second half,
 * else after its last white space, else (one word that long) at the limit, never inside a surrogate pair.
 */
function pieces(text: string): string[] {
  const out: string[] = [];
  let rest = text;
  while (rest.length > ENTRY_TEXT) {
    const window = rest.slice(0, ENTRY_TEXT);
    const half = ENTRY_TEXT / 2;
    const at = [/\n\s*\n/g, /[.!?]\s/g, /\s/g]
      .map((boundary) => {
        let last = -1;
        for (const m of window.matchAll(boundary)) if (m.index >= half) last = m.index + m[0].length;
        return last;
      })
      .find((end) => end > 0);
    let end = at ?? ENTRY_TEXT;
    if (at === undefined && /[\ud800-\udbff]/.test(rest[end - 1]!)) end--;
    out.push(rest.slice(0, end).trim());
    rest = rest.slice(end);
  }
  out.push(rest.trim());
  return out.filter((piece) => piece !== '');
}

/** The question's words that can place a snippet: four letters or more, in lower case. */
const questionWords = (question: string): string[] =>
  searchText(question)
    .toLowerCase()
    .split(/[^\p{L}\p{N}]+/u)
    .filter((w) => w.length >= 4);

/** A short excerpt around the first word of the question that occurs in the text. */
function snippet({ text: flat, lower }: Entry, words: string[]): string {
  if (flat.length <= SNIPPET) return flat;
  const at =
    words
      .map((w) => lower.indexOf(w.slice(0, Math.max(4, w.length - 2))))
      .filter((i) => i >= 0)
      .sort((a, b) => a - b)[0] ?? 0;
  const start = Math.max(0, at - 60);
  const cut = flat.slice(start, start + SNIPPET);
  return `${start > 0 ? '…' : ''}${cut}${start + SNIPPET < flat.length ? '…' : ''}`;
}

export const sourceLabel = (kind: SourceKind): string => (kind === 'knowledge' ? 'Wissensdatenbank' : KIND_LABELS[kind]);

/** The longest ending the German stemmer takes off a word (`-lichkeit` and an inflection before it). */
const ENDINGS = 10;

/** Split compounds and stems kept at most (a training document of hostile text must not grow the caches without end). */
const SPLITS_CACHED = 50_000;

/**
 * The stems of every word indexed, and compounds split against them (compounds.ts): a part is a known word when its
 * stem is one of them and it is no stop word. Splits are cached until a new stem is learnt.
 */
class Vocabulary {
  readonly stopwords: ReadonlySet<string>;
  readonly #stemmer: (word: string) => string;
  readonly #stems = new Set<string>();
  readonly #splits = new Map<string, string[]>();
  /** Stems by word: the stemmer is the costly part of analysing, and the same words come again and again. */
  readonly #stemmed = new Map<string, string>();

  constructor(stemmer: (word: string) => string, stopwords: ReadonlySet<string>) {
    this.#stemmer = stemmer;
    this.stopwords = stopwords;
  }

  readonly stem = (word: string): string => {
    let stem = this.#stemmed.get(word);
    if (stem === undefined) {
      stem = this.#stemmer(word);
      if (this.#stemmed.size >= SPLITS_CACHED) this.#stemmed.clear();
      this.#stemmed.set(word, stem);
    }
    return stem;
  };

  /** Lower case, split at anything but letters and digits, stop words left out: as Orama's German tokenizer does. */
  words(text: string): string[] {
    return text
      .toLowerCase()
      .split(/[^\p{L}\p{N}]+/u)
      .filter((word) => word !== '' && !this.stopwords.has(word));
  }

  learn(text: string): void {
    const before = this.#stems.size;
    for (const word of this.words(text)) {
      const stem = this.stem(word);
      this.#stems.add(stem);
    }
    if (this.#stems.size !== before) this.#splits.clear();
  }

  /** Whether a part of a compound is a known word: no stop word, and its stem is one of the index's. */
  #known = (part: string): boolean => {
    if (this.stopwords.has(part)) return false;
    // A stem is its word (umlauts and ß written out) without an ending of at most ENDINGS letters: a part none of
    // whose beginnings that long is a known stem is unknown without stemming it. Splitting tries many parts, most of
    // them no words, and the stemmer is what costs.
    const plain = /[äöüß]/.test(part) ? part.replace(/ä/g, 'a').replace(/ö/g, 'o').replace(/ü/g, 'u').replace(/ß/g, 'ss') : part;
    let maybe = false;
    for (let end = plain.length; end >= Math.max(MIN_PART, plain.length - ENDINGS) && !maybe; end--)
      maybe = this.#stems.has(plain.slice(0, end));
    return maybe && this.#stems.has(this.stem(part));
  };

  /** Whether `parts(word)` would split it now, not answer from the cache: a word long enough to be a compound. */
  splitsAnew(word: string): boolean {
    return word.length > 2 * MIN_PART && word.length <= MAX_WORD && !this.#splits.has(word);
  }

  /** The written parts of a compound (`['pferde', 'box']`), or `[]`. */
  parts(word: string): string[] {
    const cached = this.#splits.get(word);
    if (cached) return cached;
    const parts = splitCompound(word, this.#known);
    if (this.#splits.size >= SPLITS_CACHED) this.#splits.clear();
    this.#splits.set(word, parts);
    return parts;
  }
}

/** The analyzer over a vocabulary: stems as Orama's German tokenizer makes them, each compound followed by its parts' stems. */
function analyzer(vocabulary: Vocabulary): Analyzer {
  const { stem } = vocabulary;
  const terms = (text: string): Term[] =>
    vocabulary.words(text).map((word) => ({ stem: stem(word), parts: vocabulary.parts(word).map(stem) }));
  return Object.assign((text: string) => terms(text).flatMap((t) => [t.stem, ...t.parts]), { terms });
}
