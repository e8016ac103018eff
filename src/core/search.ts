import type { KnowledgeDocument, Workspace, WorkspaceKind } from './workspace.js';
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
}

/** An entry from its parts, with the text prepared once for indexing and snippets. */
function entry(id: string, kind: string, owner: string, ref: string, title: string, text: string): Entry {
  const flat = text.replace(/\s+/g, ' ').trim();
  return { id, kind, owner, ref, title, text: flat, lower: flat.toLowerCase() };
}

type Orama = typeof import('@orama/orama');
type Db = ReturnType<Orama['create']>;

const SNIPPET = 220;
/** Entries indexed per turn of the event loop when the index is built (a few milliseconds of work). */
const INSERT_SLICE = 8;
/** Distinct questions whose ranked hits are kept (see SearchIndex.#answers). */
const ANSWER_CACHE_SIZE = 1_000;
const SHARED = 'shared';

/**
 * Full-text search over the workspace and the knowledge base with Orama: German tokenizer, stemmer and stop
 * words, BM25 scoring. Orama is loaded and the index built by warmUp after the ready line (or on first use); a search waits for it.
 * Knowledge documents are indexed per `##` section so a hit points at the passage that answers.
 */
export class SearchIndex {
  #ready: Promise<{ orama: Orama; db: Db }> | undefined;
  readonly #workspace: Workspace;
  #knowledge: KnowledgeDocument[];
  #added: KnowledgeDocument[] = [];
  /**
   * Answers by question and filter, dropped whenever the index changes: the same question over the same index
   * ranks the same, so it is ranked once (agents and test suites ask the same questions again and again).
   */
  readonly #answers = new Map<string, Array<Source & { score: number }>>();

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
    this.#answers.clear();
  }

  #index(): Promise<{ orama: Orama; db: Db }> {
    return (this.#ready ??= (async () => {
      const [orama, { stemmer, language }, { stopwords }] = await Promise.all([
        import('@orama/orama'),
        import('@orama/stemmers/german'),
        import('@orama/stopwords/german'),
      ]);
      const db = orama.create({
        schema: { kind: 'enum', owner: 'enum', ref: 'string', title: 'string', text: 'string' } as const,
        components: { tokenizer: { stemming: true, stemmer, language, stopWords: stopwords } },
      });
      const entries: Entry[] = [];
      for (const kind of WORKSPACE_KINDS) {
        for (const record of this.#workspace[kind])
          entries.push(entry(`${kind}:${record.id}`, kind, SHARED, record.id, record.title, recordText(record)));
      }
      for (const doc of [...this.#knowledge, ...this.#added]) entries.push(...knowledgeEntries(doc));
      // In slices, yielding between them: built after the ready line, the index must not hold up the requests that
      // do not need it (Orama inserts a batch in one go).
      for (let i = 0; i < entries.length; i += INSERT_SLICE) {
        await orama.insertMultiple(db, entries.slice(i, i + INSERT_SLICE));
        await new Promise((resolve) => setImmediate(resolve));
      }
      return { orama, db };
    })());
  }

  /** Makes a knowledge document findable (a training document once indexed). */
  async addKnowledge(doc: KnowledgeDocument): Promise<void> {
    if (!this.#ready) {
      this.#added.push(doc);
      return;
    }
    const { orama, db } = await this.#index();
    try {
      await orama.insertMultiple(db, knowledgeEntries(doc));
    } finally {
      // Also after a failure part way: the index may have changed.
      this.#answers.clear();
    }
  }

  /** Re-indexes one workspace record after a change (the workspace object itself was already changed). */
  async putRecord(kind: WorkspaceKind, record: { id: string; title: string; [field: string]: unknown }): Promise<void> {
    if (!this.#ready) return; // indexed from the changed workspace when first used
    const { orama, db } = await this.#index();
    const id = `${kind}:${record.id}`;
    const remove = orama.remove as unknown as (db: Db, id: string) => unknown;
    const insert = orama.insert as unknown as (db: Db, doc: Entry) => unknown;
    try {
      remove(db, id);
      insert(db, entry(id, kind, SHARED, record.id, record.title, recordText(record)));
    } finally {
      this.#answers.clear();
    }
  }

  /**
   * Best hits first, among what `person` may see: the shared workspace and knowledge base and the person's own
   * training documents. `knowledgeOnly` searches the knowledge base alone (research reads no workspace data, spec 2.7).
   */
  async search(
    question: string,
    options: { person: string; limit?: number; knowledgeOnly?: boolean },
  ): Promise<Array<Source & { score: number }>> {
    const index = this.#index();
    const { orama, db } = await index;
    const key = JSON.stringify([question, options.person, options.limit ?? 5, options.knowledgeOnly === true]);
    const known = this.#answers.get(key);
    // Copies: a caller may change what it gets without changing the next caller's answer.
    if (known) return known.map((hit) => ({ ...hit }));
    const hits = this.#rank(orama, db, question, options);
    // Kept only if the index it came from is still the current one (a restore may have replaced it meanwhile).
    if (index === this.#ready) {
      if (this.#answers.size >= ANSWER_CACHE_SIZE) this.#answers.delete(this.#answers.keys().next().value!);
      this.#answers.set(key, hits);
    }
    return hits.map((hit) => ({ ...hit }));
  }

  #rank(
    orama: Orama,
    db: Db,
    question: string,
    options: { person: string; limit?: number; knowledgeOnly?: boolean },
  ): Array<Source & { score: number }> {
    // Orama's generic result types are too deep for tsc here; the shape is its documented search result.
    const search = orama.search as unknown as (
      db: Db,
      params: Record<string, unknown>,
    ) => { hits: Array<{ score: number; document: Entry }> };
    const result = search(db, {
      term: question,
      properties: ['title', 'text'],
      boost: { title: 2 },
      limit: options.limit ?? 5,
      where: { owner: { in: [SHARED, options.person] }, ...(options.knowledgeOnly ? { kind: { eq: 'knowledge' } } : {}) },
    });
    const words = questionWords(question);
    return result.hits.map(({ score, document }) => ({
      kind: document.kind as SourceKind,
      id: document.ref,
      title: document.title,
      snippet: snippet(document, words),
      score,
    }));
  }
}

function knowledgeEntries(doc: KnowledgeDocument): Entry[] {
  return markdownSections(doc).map((section, i) =>
    entry(
      `knowledge:${doc.id}:${i}`,
      'knowledge',
      doc.owner ?? SHARED,
      doc.id,
      section.heading === doc.title ? doc.title : `${doc.title}: ${section.heading}`,
      section.text,
    ),
  );
}

/** The question's words that can place a snippet: four letters or more, in lower case. */
const questionWords = (question: string): string[] =>
  question
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
