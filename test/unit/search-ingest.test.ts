/**
 * 41.6: one agent's training upload must not stall the server. Indexing is cut into slices of at most ENTRY_TEXT of
 * text, one per turn of the event loop, so other requests are served in between, whatever the content: ordinary
 * prose, or 256 KiB of long German compound words (each a new token). Counted in turns of the loop, not timed.
 */
import { describe, expect, it } from 'vitest';
import { ENTRY_TEXT, SearchIndex, SPLITS_PER_TURN } from '../../src/core/resources/search.js';
import type { KnowledgeDocument, Workspace } from '../../src/core/resources/workspace.js';

const LIMIT = 256 * 1024;
const emptyWorkspace = {
  contacts: [],
  work_items: [],
  letters: [],
  documents: [],
  listings: [],
  animals: [],
  places: [],
} as unknown as Workspace;
let made = 0;
/**
 * An index no other emulator of this process shares (core/resources/search.ts, SharedIndexes): a document goes into
 * it in place, as in a serve, where one emulator holds the index. A place of its own makes its content unique.
 */
const indexOfOwn = (knowledge: KnowledgeDocument[] = []) =>
  new SearchIndex({ ...emptyWorkspace, places: [{ id: `pla-${++made}`, title: `Leerstand ${made}` }] }, knowledge);
const PARTS = [
  'donau',
  'dampf',
  'schiff',
  'fahrts',
  'gesellschafts',
  'kapitäns',
  'mützen',
  'band',
  'fabrik',
  'arbeiter',
  'raum',
  'schlüssel',
];

/** Deterministic compound words of about `length` letters, separated by spaces, to `size` characters; no sentence ends. */
function compounds(size: number, length: number): string {
  let text = '# Komposita\n\n';
  for (let i = 0; text.length < size; i++) {
    let word = '';
    for (let j = i; word.length < length; j = (j * 7 + 3) % 1009) word += PARTS[j % PARTS.length];
    text += `${word} `;
  }
  return text.slice(0, size);
}

const prose = (size: number) => `# Notiz\n\n${'Der Hufschmied kommt am Dienstag um neun Uhr zum Stall. '.repeat(size / 57)}`.slice(0, size);

const doc = (id: string, content: string): KnowledgeDocument => ({ id, title: id, file_name: `${id}.md`, content, owner: 'person_erika' });

/** Turns of the event loop while `work` runs: a chain of setImmediate callbacks, each one turn. */
async function turnsDuring(work: Promise<unknown>): Promise<number> {
  let turns = 0;
  let done = false;
  const tick = () => {
    if (done) return;
    turns++;
    setImmediate(tick);
  };
  setImmediate(tick);
  await work;
  done = true;
  return turns;
}

// A document at the size limit takes about a second of CPU to index, several seconds on a loaded machine. What is
// checked is counted in turns of the loop, never timed.
describe('41.6: ingest of a training document yields to other requests (README table of choices, training limits)', () => {
  it.each([
    ['prose', prose(LIMIT)],
    ['long compound words', compounds(LIMIT, 40)],
    ['one word of 256 KiB', 'x'.repeat(LIMIT)],
  ])('%s: a 256 KiB document is indexed in at least content / ENTRY_TEXT turns of the loop', async (_name, content) => {
    const index = indexOfOwn();
    await index.warmUp();
    const turns = await turnsDuring(index.addKnowledge(doc('gross', content)));
    expect(turns).toBeGreaterThanOrEqual(Math.floor(content.length / ENTRY_TEXT));
  });

  it('a document that was cut into pieces is found, and is one source, not one per piece', async () => {
    const content = `${prose(LIMIT)}\n\nDie Kaution beträgt drei Monatsmieten.`;
    const index = indexOfOwn();
    await index.warmUp();
    await index.addKnowledge(doc('gross', content));
    const hits = await index.search('Hufschmied Dienstag', { person: 'person_erika', limit: 5 });
    expect(hits.map((h) => h.id)).toEqual(['gross']);
    const kaution = await index.search('Wie hoch ist die Kaution?', { person: 'person_erika', limit: 5 });
    expect(kaution[0]?.sentences).toContain('Die Kaution beträgt drei Monatsmieten.');
  });

  it('the pieces of one long section never crowd out other passages: as many distinct sources as asked for', async () => {
    const index = indexOfOwn();
    await index.warmUp();
    await index.addKnowledge(doc('gross', prose(LIMIT)));
    // Weaker hits than any piece of the long one: one mention among other words.
    const weaker = `# Stall\n\nDer Hufschmied war da. ${'Die Weide wird im Mai gemäht und das Heu eingefahren. '.repeat(40)}`;
    for (const id of ['klein-1', 'klein-2']) await index.addKnowledge(doc(id, weaker));
    const hits = await index.search('Hufschmied Dienstag', { person: 'person_erika', limit: 3 });
    expect(hits.map((h) => h.id).sort()).toEqual(['gross', 'klein-1', 'klein-2']);
  });

  it(`45.2: compounds are split at most ${SPLITS_PER_TURN} a turn: 256 KiB of distinct 40-letter chains of known words takes a turn per ${SPLITS_PER_TURN}`, async () => {
    // Every word a new chain of words the document also says alone, so each is split anew, at up to MAX_TRIES look-ups.
    const known = PARTS.map((p) => p.replace(/s$/, ''));
    const words = new Set<string>();
    for (let i = 0; words.size * 41 < LIMIT - 1024; i++) {
      let word = '';
      for (let n = i; word.length < 36; n = Math.floor(n / known.length) + word.length) word += known[n % known.length];
      words.add(word.slice(0, 40));
    }
    const content = `# Komposita\n\n${known.join(' ')}. ${[...words].join(' ')}`.slice(0, LIMIT);
    const index = indexOfOwn();
    await index.warmUp();
    const turns = await turnsDuring(index.addKnowledge(doc('komposita', content)));
    expect(words.size).toBeGreaterThan(50 * SPLITS_PER_TURN);
    expect(turns).toBeGreaterThanOrEqual(Math.floor(words.size / SPLITS_PER_TURN));
  });

  it('the index built at start is sliced the same way', async () => {
    const index = indexOfOwn([doc('a', compounds(LIMIT, 40)), doc('b', prose(LIMIT))]);
    const turns = await turnsDuring(index.warmUp());
    expect(turns).toBeGreaterThanOrEqual(Math.floor((2 * LIMIT) / ENTRY_TEXT));
  });
});
