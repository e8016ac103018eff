/**
 * Emulators of one process on the same fixtures share one search index (a conformance run starts one per scenario
 * run, a test file one per test). Sharing must be invisible: what one emulator's search finds never depends on what
 * another emulator indexed or changed.
 */
import { describe, expect, it } from 'vitest';
import { indexBuilds, SearchIndex } from '../../src/core/resources/search.js';
import type { KnowledgeDocument, Workspace } from '../../src/core/resources/workspace.js';
import { loadFixtures } from '../../src/loaders/fixtures.js';

const fixtures = await loadFixtures();
/** An emulator's own copy of the fixtures, as each emulator loads them. */
const copy = (): [Workspace, KnowledgeDocument[]] => [structuredClone(fixtures.workspace), structuredClone(fixtures.knowledge)];
const ERIKA = { person: 'person_erika', limit: 5 };
const ids = async (index: SearchIndex, question: string) => (await index.search(question, ERIKA)).map((h) => `${h.kind}:${h.id}`);
/**
 * Fixtures with a record no other test has: the first index of this content is built here, not found built by an
 * emulator of another test (the unit tests share their modules: vitest.config.ts).
 */
const unique = (name: string): [Workspace, KnowledgeDocument[]] => {
  const [workspace, knowledge] = copy();
  workspace.places.push({ id: `pla-${name}`, title: name, notes: 'Nur in diesem Test.' });
  return [workspace, knowledge];
};

describe('one search index for the emulators of a process on the same fixtures', () => {
  it('two emulators on the same workspace and documents build the index once, and rank alike', async () => {
    const before = indexBuilds.count;
    const a = new SearchIndex(...unique('Zwilling'));
    const b = new SearchIndex(...unique('Zwilling'));
    await Promise.all([a.warmUp(), b.warmUp()]);
    expect(indexBuilds.count - before).toBe(1);
    const question = 'Wann kommt der Hufschmied?';
    expect(await ids(a, question)).toEqual(await ids(b, question));
    expect(await ids(a, question)).not.toEqual([]);
  });

  it('a training document indexed by one emulator is found by it, and not by the other', async () => {
    const a = new SearchIndex(...copy());
    const b = new SearchIndex(...copy());
    await Promise.all([a.warmUp(), b.warmUp()]);
    const before = indexBuilds.count;
    await a.addKnowledge({
      id: 'doc-quarz',
      title: 'Quarzsandlieferung',
      file_name: 'quarz.md',
      content: '# Quarzsandlieferung\n\nDer Quarzsand für die Reithalle kommt im Oktober.',
      owner: 'person_erika',
    });
    expect(indexBuilds.count - before).toBe(1);
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
    expect(indexBuilds.count - before).toBe(1);
    expect(await ids(a, 'Kies für den Paddock')).toContain('knowledge:doc-kies');
  });

  it('a record changed by one emulator is found changed by it, and as it was by the other', async () => {
    const [workspace, knowledge] = copy();
    const a = new SearchIndex(workspace, knowledge);
    const b = new SearchIndex(...copy());
    await Promise.all([a.warmUp(), b.warmUp()]);
    const contact = workspace.contacts[0]!;
    contact.notes = 'Zuständig für die Zisternenpumpe.';
    await a.putRecord('contacts', contact);
    expect(await ids(a, 'Wer kümmert sich um die Zisternenpumpe?')).toContain(`contacts:${contact.id}`);
    expect(await ids(b, 'Wer kümmert sich um die Zisternenpumpe?')).not.toContain(`contacts:${contact.id}`);
  });

  it('a workspace changed while the shared index is being built does not reach the index the others get', async () => {
    const [workspace, knowledge] = unique('Wettlauf');
    const a = new SearchIndex(workspace, knowledge);
    const before = indexBuilds.count;
    const building = a.warmUp();
    // Changed in the same turn, before the build has read a record (it loads Orama first).
    const contact = workspace.contacts[1]!;
    contact.notes = 'Bringt die Zisternenpumpe zur Reparatur.';
    await building;
    expect(indexBuilds.count - before).toBe(1);
    const b = new SearchIndex(...unique('Wettlauf'));
    expect(await ids(b, 'Wer bringt die Zisternenpumpe zur Reparatur?')).not.toContain(`contacts:${contact.id}`);
    await a.putRecord('contacts', contact);
    expect(await ids(a, 'Wer bringt die Zisternenpumpe zur Reparatur?')).toContain(`contacts:${contact.id}`);
  });
});
