/**
 * Spec 2.7 workspace.write, 4.4 rule 1: which questions ask for a change, and how a German request becomes
 * exactly one action on exactly the record it names. Pure core functions on the fixtures' workspace.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { applyChange, planChange, type Plan } from '../../src/core/resources/actions.js';
import { asksForChange } from '../../src/core/resources/ask.js';
import type { Workspace } from '../../src/core/resources/workspace.js';
import { loadFixtures } from '../../src/loaders/fixtures.js';

let workspace: Workspace;
beforeAll(async () => {
  workspace = (await loadFixtures()).workspace;
});

const plan = (question: string): Plan => planChange(question, workspace, (kind) => `${kind}-new`);
const action = (question: string) => {
  const p = plan(question);
  if (p.kind !== 'action') throw new Error(`no action for ${question}: ${p.reason}`);
  return p.action;
};

describe('4.4 rule 1: which questions ask for a change', () => {
  it.each([
    'Was steht in der Kündigung des Einstellervertrags für Cäsar?',
    'Wann ist die Bestellung Heulieferung April 2026 rausgegangen?',
    'Welche Änderungen gab es an der Hausordnung?',
    'Wer erstellt die Nebenkostenabrechnung?',
    'Ist die Heizungswartung schon als erledigt markiert?',
    'Wann kommt der Hufschmied?',
  ])('a question is a read: %s', (question) => expect(asksForChange(question)).toBe(false));

  it.each([
    'Lege einen Kontakt „Anna Schmidt“ an.',
    'Lege eine Aufgabe „Zaun prüfen“ für Georg Mustermann am Nordweg hinter der Scheune an.',
    'Setze die Miete der Pferdebox von Luna im Stall am Hof auf 350.',
    'Trage bei Josef Huber die neue Telefonnummer 0170 999 ein.',
    'Ändere beim Kontakt „Josef Huber“ die Telefonnummer auf „+49 170 1234567“.',
  ])('a request is a write: %s', (question) => expect(asksForChange(question)).toBe(true));
});

describe('planning one action from a German request', () => {
  it('create: kind, quoted title and `Feld: Wert` pairs', () => {
    expect(action('Lege einen Kontakt „Anna Schmidt“ an, Telefon: 0171 2345678, Firma: Schmidt Gartenbau, Ort: Lenggries.')).toMatchObject({
      kind: 'contacts',
      operation: 'create',
      fields: { title: 'Anna Schmidt', phone: '0171 2345678', company: 'Schmidt Gartenbau', city: 'Lenggries' },
    });
    expect(action('Erstelle einen neuen Kontakt namens Anna Schmidt mit der Telefonnummer 0171 2345678')).toMatchObject({
      fields: { title: 'Anna Schmidt', phone: '0171 2345678' },
    });
  });

  it('a quoted new title that contains an existing title and an update verb is still a create', () => {
    expect(
      action('Lege eine Aufgabe „Heizungswartung Isarstraße 21 verschieben“ an, Status: offen, Fälligkeit: 2026-06-01.'),
    ).toMatchObject({
      operation: 'create',
      fields: { title: 'Heizungswartung Isarstraße 21 verschieben', status: 'offen', due: '2026-06-01' },
    });
  });

  it('update: the record named before the value, never a record named inside the new value', () => {
    expect(action('Ändere bei Luna die Notiz auf „Tierarzt ist Dr. Anna Berger“.')).toMatchObject({
      kind: 'animals',
      record_id: 'ani-001',
      fields: { notes: 'Tierarzt ist Dr. Anna Berger' },
    });
    expect(action('Ändere bei Luna die Notiz auf Hufschmied Josef Huber kommt am Mittwoch.')).toMatchObject({
      record_id: 'ani-001',
      fields: { notes: 'Hufschmied Josef Huber kommt am Mittwoch' },
    });
  });

  it('update: several fields joined by "und", field words that are also kind words, dates, status and renaming', () => {
    expect(action('Ändere bei Josef Huber die Firma auf Huber GmbH und die Telefonnummer auf 0170 111')).toMatchObject({
      record_id: 'con-002',
      fields: { company: 'Huber GmbH', phone: '0170 111' },
    });
    expect(action('Ändere bei Josef Huber den Ort auf München')).toMatchObject({ record_id: 'con-002', fields: { city: 'München' } });
    expect(action('Verschiebe die Aufgabe „Heizungswartung Isarstraße 21“ auf den 2026-05-01')).toMatchObject({
      record_id: 'wi-001',
      fields: { due: '2026-05-01' },
    });
    expect(action('Setze die Aufgabe „Heizungswartung Isarstraße 21“ auf erledigt')).toMatchObject({
      record_id: 'wi-001',
      fields: { status: 'erledigt' },
    });
    expect(action('Markiere die Aufgabe „Heizungswartung Isarstraße 21“ als erledigt.')).toMatchObject({
      fields: { status: 'erledigt' },
      before: { status: 'in Arbeit' },
    });
    expect(action('Benenne den Kontakt Josef Huber um in Sepp Huber')).toMatchObject({
      record_id: 'con-002',
      fields: { title: 'Sepp Huber' },
    });
    expect(action('Ändere den Namen von Josef Huber auf Sepp Huber')).toMatchObject({
      record_id: 'con-002',
      fields: { title: 'Sepp Huber' },
    });
    expect(action('Trage bei Josef Huber die Telefonnummer 0170 999 ein.')).toMatchObject({
      record_id: 'con-002',
      fields: { phone: '0170 999' },
    });
  });

  it('the description says exactly what changes, old and new', () => {
    expect(action('Ändere beim Kontakt „Josef Huber“ die Telefonnummer auf „+49 170 1234567“.').description).toBe(
      'Eintrag Kontakt „Josef Huber“ (con-002) ändern: Telefon von „+49 8041 771230“ auf „+49 170 1234567“.',
    );
  });

  it('deleting, sending and unreadable requests prepare nothing and say why, in German', () => {
    expect(plan('Lösche den Kontakt Josef Huber')).toMatchObject({ kind: 'unclear', reason: expect.stringMatching(/^Löschen, Versenden/) });
    expect(plan('Erstelle bitte etwas Schönes.')).toMatchObject({
      kind: 'unclear',
      reason: expect.stringMatching(/welche Art von Eintrag/),
    });
    expect(plan('Ändere beim Kontakt „Josef Huber“ die Telefonnummer auf „+49 8041 771230“.')).toMatchObject({
      kind: 'unclear',
      reason: expect.stringMatching(/steht das schon so/),
    });
  });

  it('adversarial input of the largest accepted size (4 000 characters) is planned without catastrophic backtracking', () => {
    const heads = [
      'Ändere beim Kontakt „Josef Huber“ die Telefonnummer auf',
      'Lege einen Kontakt „A“ an',
      'Trage bei Josef Huber',
      'Setze',
    ];
    const pads = [' ', ' und', ', ', '„', 'leg ', 'Telefon: ', 'auf ', '\t', '! '];
    for (const head of heads) {
      for (const pad of pads) {
        const question = `${head}${pad.repeat(4000)}`.slice(0, 3999) + 'x';
        asksForChange(question);
        expect(['action', 'unclear']).toContain(plan(question).kind);
      }
    }
  });
});

describe('applying a change', () => {
  it('an update whose record is gone (other fixtures) is skipped, never turned into a partial record', () => {
    const copy = structuredClone(workspace);
    expect(applyChange(copy, { kind: 'contacts', operation: 'update', record: { id: 'con-999', title: 'x', phone: '1' } })).toBeNull();
    expect(applyChange(copy, { kind: 'nonsense' as never, operation: 'create', record: { id: 'a', title: 'b' } })).toBeNull();
    expect(copy.contacts.some((c) => c.id === 'con-999')).toBe(false);
  });
});
