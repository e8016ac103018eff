/**
 * Emulators of one process on the same fixtures share one search index (a conformance run starts one per scenario
 * run, a test file one per test). Sharing must be invisible: what one emulator's search finds never depends on what
 * another emulator indexed or changed.
 */
import { describe, expect, it } from 'vitest';
import { SearchIndex } from '../../src/core/resources/search.js';
import type { KnowledgeDocument, Workspace } from '../../src/core/resources/workspace.js';
import { loadFixtures } from '../../src/loaders/fixtures.js';

const fixtures = await loadFixtures();
const ERIKA = { person: 'person_erika', limit: 5 };
const ids = async (index: SearchIndex, question: string) => (await index.search(question, ERIKA)).map((h) => `${h.kind}:${h.id}`);
/**
 * An emulator's own copy of the fixtures, with a record no other test has: the index of this content is first built
 * here, not found built and held by an emulator of another test (the unit tests share their modules).
 */
const fixturesOf = (test: string): [Workspace, KnowledgeDocument[]] => {
  const [workspace, knowledge] = [structuredClone(fixtures.workspace), structuredClone(fixtures.knowledge)];
  workspace.places.push({ id: `pla-${test}`, title: test, notes: 'Nur in diesem Test.' });
  return [workspace, knowledge];
};
const quarz = (id: string): KnowledgeDocument => ({
  id,
  title: 'Quarzsandlieferung',
  file_name: `${id}.md`,
  content: '# Quarzsandlieferung\n\nDer Quarzsand für die Reithalle kommt im Oktober.',
  owner: 'person_erika',
});

describe('one search index for the emulators of a process on the same fixtures', () => {
  it('two emulators on the same workspace and documents search one index, and rank alike', async () => {
    const a = new SearchIndex(...fixturesOf('Zwilling'));
    const b = new SearchIndex(...fixturesOf('Zwilling'));
    expect(await a.built()).toBe(await b.built());
    const question = 'Wann kommt der Hufschmied?';
    expect(await ids(a, question)).toEqual(await ids(b, question));
    expect(await ids(a, question)).not.toEqual([]);
    // Other content, another index.
    expect(await new SearchIndex(...fixturesOf('Drilling')).built()).not.toBe(await a.built());
  });

  it('a training document indexed by one emulator is found by it, and not by the other', async () => {
    const a = new SearchIndex(...fixturesOf('Quarz'));
    const b = new SearchIndex(...fixturesOf('Quarz'));
    const shared = await a.built();
    expect(await b.built()).toBe(shared);
    await a.addKnowledge(quarz('doc-quarz'));
    const own = await a.built();
    expect(own).not.toBe(shared);
    expect(await b.built()).toBe(shared);
    expect(await ids(a, 'Wann kommt der Quarzsand?')).toContain('knowledge:doc-quarz');
    expect(await ids(b, 'Wann kommt der Quarzsand?')).not.toContain('knowledge:doc-quarz');
    // A's next document goes into its own index, built no more.
    await a.addKnowledge({
      id: 'doc-kies',
      title: 'Kies',
      file_name: 'kies.md',
      content: '# Kies\n\nDer Kies für den Paddock.',
      owner: 'person_erika',
    });
    expect(await a.built()).toBe(own);
    expect(await ids(a, 'Kies für den Paddock')).toContain('knowledge:doc-kies');
  });

  it('a record changed by one emulator is found changed by it, and as it was by the other', async () => {
    const [workspace, knowledge] = fixturesOf('Pumpe');
    const a = new SearchIndex(workspace, knowledge);
    const b = new SearchIndex(...fixturesOf('Pumpe'));
    expect(await a.built()).toBe(await b.built());
    const contact = workspace.contacts[0]!;
    contact.notes = 'Zuständig für die Zisternenpumpe.';
    await a.putRecord('contacts', contact);
    expect(await ids(a, 'Wer kümmert sich um die Zisternenpumpe?')).toContain(`contacts:${contact.id}`);
    expect(await ids(b, 'Wer kümmert sich um die Zisternenpumpe?')).not.toContain(`contacts:${contact.id}`);
  });

  it('an index no other emulator took (a serve has one emulator) is changed in place, not built again', async () => {
    const a = new SearchIndex(...fixturesOf('Allein'));
    const alone = await a.built();
    await a.addKnowledge(quarz('doc-allein'));
    expect(await a.built()).toBe(alone);
    expect(await ids(a, 'Wann kommt der Quarzsand?')).toContain('knowledge:doc-allein');
    // It is no longer shared: an emulator on the same fixtures now builds its own, without the document.
    const b = new SearchIndex(...fixturesOf('Allein'));
    expect(await b.built()).not.toBe(alone);
    expect(await ids(b, 'Wann kommt der Quarzsand?')).not.toContain('knowledge:doc-allein');
  });

  it('a workspace changed while the shared index is being built does not reach the index the others get', async () => {
    const [workspace, knowledge] = fixturesOf('Wettlauf');
    const a = new SearchIndex(workspace, knowledge);
    const building = a.built();
    // Changed in the same turn, before the build has read a record (it loads Orama first).
    const contact = workspace.contacts[1]!;
    contact.notes = 'Bringt die Zisternenpumpe zur Reparatur.';
    const b = new SearchIndex(...fixturesOf('Wettlauf'));
    expect(await b.built()).toBe(await building);
    expect(await ids(b, 'Wer bringt die Zisternenpumpe zur Reparatur?')).not.toContain(`contacts:${contact.id}`);
    await a.putRecord('contacts', contact);
    expect(await ids(a, 'Wer bringt die Zisternenpumpe zur Reparatur?')).toContain(`contacts:${contact.id}`);
  });
});
