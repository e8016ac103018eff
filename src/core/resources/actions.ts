import { textOf } from '../../protocol/format.js';
import type { PendingAction, WorkspaceChange } from '../state/entities.js';
import { KIND_LABELS, WORKSPACE_KINDS, type Workspace, type WorkspaceKind, type WorkspaceRecord } from './workspace.js';

export type { PendingAction, WorkspaceChange } from '../state/entities.js';

/** German words that name a kind when a change is asked for (docs/serve.md: write actions). */
const KIND_WORDS: Array<[RegExp, WorkspaceKind]> = [
  [/\bkontakt/i, 'contacts'],
  [/\b(aufgabe|arbeitsauftrag|auftrag|to-?do)/i, 'work_items'],
  [/\b(brief|schreiben\b)/i, 'letters'],
  [/\bdokument/i, 'documents'],
  [/\b(inserat|anzeige)/i, 'listings'],
  [/\b(tier|pferd|hund|katze)\b/i, 'animals'],
  [/\b(ort|standort)\b/i, 'places'],
];

/** Field names people use, per kind; the first word of each list is how the description names the field. */
export const FIELD_WORDS: Record<WorkspaceKind, Record<string, string[]>> = {
  contacts: {
    title: ['Name', 'Namen'],
    company: ['Firma', 'Unternehmen'],
    role: ['Rolle', 'Funktion'],
    email: ['E-Mail', 'Email', 'Mail', 'E-Mail-Adresse'],
    phone: ['Telefon', 'Telefonnummer', 'Tel', 'Handy', 'Handynummer', 'Mobil', 'Mobilnummer'],
    city: ['Ort', 'Stadt', 'Wohnort'],
    notes: ['Notiz', 'Notizen', 'Bemerkung'],
  },
  work_items: {
    title: ['Titel'],
    description: ['Beschreibung'],
    status: ['Status'],
    due: ['Fälligkeit', 'fällig', 'Frist', 'Termin', 'Fälligkeitsdatum'],
    assignee: ['Zuständig', 'Zuständige', 'Zuständiger', 'Bearbeiter', 'verantwortlich'],
  },
  letters: {
    title: ['Betreff', 'Titel'],
    sender: ['Absender'],
    recipient: ['Empfänger', 'Empfängerin'],
    date: ['Datum'],
    body: ['Text', 'Inhalt'],
  },
  documents: { title: ['Titel'], summary: ['Zusammenfassung'], content: ['Inhalt', 'Text'], tags: ['Schlagworte', 'Tags'] },
  places: {
    title: ['Name', 'Namen'],
    address: ['Adresse', 'Anschrift'],
    city: ['Ort', 'Stadt'],
    category: ['Kategorie'],
    notes: ['Notiz', 'Notizen'],
  },
  listings: { title: ['Titel'], description: ['Beschreibung'], price_eur: ['Preis', 'Miete'], location: ['Lage'], status: ['Status'] },
  animals: {
    title: ['Name', 'Namen'],
    species: ['Tierart', 'Art'],
    breed: ['Rasse'],
    born: ['Geburtsdatum', 'geboren'],
    owner: ['Besitzer', 'Besitzerin', 'Halter', 'Eigentümer'],
    notes: ['Notiz', 'Notizen'],
  },
};

export const fieldLabel = (kind: WorkspaceKind, field: string): string => FIELD_WORDS[kind][field]?.[0] ?? field;
const escapeRe = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

const QUOTED = /[„“"»«‚‘'’]([^„“”"»«‚‘’']{1,200})[“”"«»‘’']/;
const CREATE_VERB =
  /(?<!\p{L})(erstell|anleg|leg\w*\b.*\ban\b|hinzufüg|füg\w*\b.*\bhinzu\b|trag\w*\b.*\bein\b|schreib|verfass|neue[nrs]?\b)/iu;
const UPDATE_VERB = /(?<!\p{L})(änder|aktualisier|setz|verschieb|markier|trag\w*\b.*\bum\b)/iu;
const UNSUPPORTED_VERB = /(?<!\p{L})(lösch|entfern|send|schick|storn|kündig|bestell|buch)/iu;

export type Plan =
  | { kind: 'action'; action: Pick<PendingAction, 'kind' | 'operation' | 'record_id' | 'fields' | 'before' | 'description'> }
  | { kind: 'unclear'; reason: string };

/** Which kind a question names, looking before the first quote or colon (after them come values). */
function kindIn(text: string): WorkspaceKind | undefined {
  const head = text.split(/[„“"»:]/)[0] ?? text;
  let best: { at: number; kind: WorkspaceKind } | undefined;
  for (const [re, kind] of KIND_WORDS) {
    const at = head.search(re);
    if (at >= 0 && (!best || at < best.at)) best = { at, kind };
  }
  return best?.kind;
}

/** Field words of a kind, longest first (so "Telefonnummer" wins over "Telefon"). */
function fieldWords(kind: WorkspaceKind): Array<{ field: string; name: string }> {
  return Object.entries(FIELD_WORDS[kind])
    .flatMap(([field, names]) => names.map((name) => ({ field, name })))
    .sort((a, b) => b.name.length - a.name.length);
}

/** `Feld: Wert`, `Feld „Wert“` or `Feld 0171 …` (a value that starts with a digit or +), each value running to the next field or the end. */
function fieldsIn(text: string, kind: WorkspaceKind): Record<string, string> {
  const words = fieldWords(kind);
  const pattern = new RegExp(`(?:^|[\\s,;(])(${words.map((w) => escapeRe(w.name)).join('|')})(?:\\s*[:=]\\s*|\\s+(?=[„“"»+\\d]))`, 'gi');
  const hits = [...text.matchAll(pattern)].map((m) => ({ name: m[1]!, start: m.index, valueStart: m.index + m[0].length }));
  const fields: Record<string, string> = {};
  hits.forEach((hit, i) => {
    const end = i + 1 < hits.length ? hits[i + 1]!.start : text.length;
    const field = words.find((w) => w.name.toLowerCase() === hit.name.toLowerCase())!.field;
    const value = cleanValue(text.slice(hit.valueStart, end));
    if (value) fields[field] = value;
  });
  return fields;
}

/** Words that end a request but are not part of a value ("… auf X ändern", "… X und die …"). */
const TRAILING_WORDS = new Set([
  'und',
  'ein',
  'an',
  'hinzu',
  'um',
  'der',
  'die',
  'das',
  'den',
  'dem',
  'bitte',
  'ändern',
  'setzen',
  'aktualisieren',
  'verschieben',
  'markieren',
  'umtragen',
  'umbenennen',
  'eintragen',
]);
const TRAILING_CHARS = new Set([' ', '\t', '\n', '\r', ',', ';', '.', '!', '?', ':']);

/** Strips trailing punctuation and filler words, in linear time (no regex: the input is up to 4 000 characters). */
function trimTail(raw: string): string {
  let value = raw;
  for (;;) {
    let end = value.length;
    while (end > 0 && TRAILING_CHARS.has(value[end - 1]!)) end--;
    value = value.slice(0, end);
    const space = value.lastIndexOf(' ');
    const last = value.slice(space + 1).toLowerCase();
    if (space >= 0 && TRAILING_WORDS.has(last)) value = value.slice(0, space);
    else return value;
  }
}

function cleanValue(raw: string): string {
  let value = trimTail(raw.trim());
  const quoted = QUOTED.exec(value);
  if (quoted && quoted.index === 0) value = quoted[1]!;
  return value.replace(/^[„“"»'‚]|[“”"«'’]$/g, '').trim();
}

/** The question without its quoted parts (values and new titles), so those are never read as a target or a verb. */
const unquoted = (question: string): string => question.replace(new RegExp(QUOTED.source, 'g'), ' ');

/** Where a value begins ("… auf X", "… als erledigt", "… in X"): a target is never looked for after it. */
const VALUE_START = /(?<!\p{L})(?:auf|als|zu|in)\s/iu;

const containsWord = (text: string, phrase: string): boolean =>
  new RegExp(`(?<![\\p{L}\\d])${escapeRe(phrase)}(?![\\p{L}\\d])`, 'iu').test(text);

/**
 * The record a request names: a quoted string that is exactly a title, else the longest title found (as whole
 * words) before the first value, in the named kind first, then in every kind.
 */
function findRecord(
  question: string,
  workspace: Workspace,
  kind?: WorkspaceKind,
): { kind: WorkspaceKind; record: WorkspaceRecord } | undefined {
  const kinds = (first?: WorkspaceKind) => (first ? [first, ...WORKSPACE_KINDS.filter((k) => k !== first)] : [...WORKSPACE_KINDS]);
  const quotes = [...question.matchAll(new RegExp(QUOTED.source, 'g'))].map((m) => m[1]!.trim().toLowerCase());
  for (const k of kinds(kind)) {
    const record = workspace[k].find((r) => typeof r.title === 'string' && quotes.includes(r.title.toLowerCase()));
    if (record) return { kind: k, record };
  }
  const plain = unquoted(question);
  const cut = plain.search(VALUE_START);
  const head = cut >= 0 ? plain.slice(0, cut) : plain;
  for (const k of kinds(kind)) {
    let best: WorkspaceRecord | undefined;
    for (const record of workspace[k]) {
      if (typeof record.title !== 'string' || record.title.length < 3) continue;
      if ((!best || record.title.length > best.title.length) && containsWord(head, record.title)) best = record;
    }
    if (best) return { kind: k, record: best };
  }
  return undefined;
}

const HOW =
  'Nennen Sie die Art des Eintrags (Kontakt, Aufgabe, Brief, Dokument, Ort, Inserat oder Tier), den Namen oder Titel in ' +
  'Anführungszeichen und die Felder mit Doppelpunkt, ' +
  'zum Beispiel: Lege einen Kontakt „Anna Schmidt“ an, Telefon: 0171 2345678, Ort: München. Oder: Ändere beim Kontakt „Josef Huber“ ' +
  'die Telefonnummer auf „+49 170 1234567“.';

/**
 * Turns a German request for a change into exactly one action, or says what is missing. Deterministic:
 * the same question and workspace always give the same plan (docs/serve.md: write actions, with examples).
 */
export function planChange(question: string, workspace: Workspace, newRecordId: (kind: WorkspaceKind) => string): Plan {
  const verbs = unquoted(question);
  const creates = CREATE_VERB.test(verbs);
  const updates = UPDATE_VERB.test(verbs) || /(?<!\p{L})benenn/iu.test(verbs);
  if (UNSUPPORTED_VERB.test(verbs) && !creates && !updates) {
    return {
      kind: 'unclear',
      reason:
        'Löschen, Versenden, Kündigen oder Buchen bietet die Agentenebene nicht an; möglich sind das Anlegen und das Ändern einzelner Einträge.',
    };
  }
  const named = kindIn(question);
  const target = updates || creates ? findRecord(question, workspace, named) : undefined;
  const newTitle = QUOTED.test(question) || /(?<!\p{L})(?:namens|mit dem (?:namen|titel))\s/iu.test(question);
  if (target && (updates || !named || !newTitle)) return planUpdate(question, target.kind, target.record); // "Trage bei Josef Huber … ein"
  if (creates) {
    if (!named) return { kind: 'unclear', reason: `Ich konnte nicht erkennen, welche Art von Eintrag angelegt werden soll. ${HOW}` };
    const fields = fieldsIn(question, named);
    const quoted = QUOTED.exec(question)?.[1]?.trim();
    const called = /(?<!\p{L})(?:namens|mit dem (?:namen|titel))\s+([^,;.]{1,200})/iu.exec(question)?.[1];
    const title = fields.title ?? quoted ?? (called ? trimTail(called.split(/\s+mit\s/i)[0]!) : undefined);
    if (!title) return { kind: 'unclear', reason: `Mir fehlt der Name oder Titel des neuen Eintrags. ${HOW}` };
    const record_id = newRecordId(named);
    const all = { ...fields, title };
    const details = Object.entries(all).filter(([f]) => f !== 'title');
    const description =
      `Neuen Eintrag der Art ${KIND_LABELS[named]} „${title}“ anlegen` +
      (details.length ? ` mit ${details.map(([f, v]) => `${fieldLabel(named, f)} „${v}“`).join(', ')}.` : ' (ohne weitere Angaben).');
    return { kind: 'action', action: { kind: named, operation: 'create', record_id, fields: all, description } };
  }
  if (updates)
    return { kind: 'unclear', reason: `Ich habe keinen Eintrag gefunden, dessen Name oder Titel in der Anfrage vorkommt. ${HOW}` };
  return { kind: 'unclear', reason: `Ich konnte nicht eindeutig erkennen, was geändert werden soll. ${HOW}` };
}

const DATE_LIKE = /^\d{4}-\d{2}-\d{2}$|^\d{1,2}\.\s?\d{1,2}\.(\s?\d{2,4})?$/;

/** "… Feld auf X", several joined by "und"; without a field word: a date to the kind's date field, "als X"/"auf X" to its status. */
function fieldsByMarker(rest: string, kind: WorkspaceKind): Record<string, string> {
  const words = fieldWords(kind);
  const hits: Array<{ field: string; at: number; end: number }> = [];
  const taken: Array<[number, number]> = [];
  for (const w of words) {
    const re = new RegExp(`(?<![\\p{L}\\d])${escapeRe(w.name)}(?![\\p{L}\\d])`, 'giu');
    for (const m of rest.matchAll(re)) {
      const at = m.index;
      if (taken.some(([a, b]) => at < b && at + w.name.length > a)) continue; // inside a longer field word
      taken.push([at, at + w.name.length]);
      hits.push({ field: w.field, at, end: at + w.name.length });
    }
  }
  hits.sort((a, b) => a.at - b.at);
  const fields: Record<string, string> = {};
  hits.forEach((hit, i) => {
    const segment = rest.slice(hit.end, i + 1 < hits.length ? hits[i + 1]!.at : rest.length);
    const value = VALUE_START.exec(segment);
    if (value) {
      const text = cleanValue(segment.slice(value.index + value[0].length).replace(/^(?:den|die|das|dem)\s+(?=\d)/i, ''));
      if (text) fields[hit.field] = text;
    }
  });
  if (Object.keys(fields).length > 0 || hits.length > 0) return fields;
  const value = VALUE_START.exec(rest);
  if (!value) return {};
  const text = cleanValue(rest.slice(value.index + value[0].length).replace(/^(?:den|die|das|dem)\s+(?=\d)/i, ''));
  if (!text) return {};
  if (/(?<!\p{L})benenn/iu.test(rest)) return { title: text };
  const dateField = (['due', 'date', 'born'] as const).find((f) => FIELD_WORDS[kind][f]);
  if (DATE_LIKE.test(text) && dateField) return { [dateField]: text };
  if (FIELD_WORDS[kind].status) return { status: text };
  return {};
}

function planUpdate(question: string, kind: WorkspaceKind, record: WorkspaceRecord): Plan {
  // The record's title (quoted or not) is removed once, so it is never read as a field or a value.
  const at = question.toLowerCase().indexOf(record.title.toLowerCase());
  let rest = question;
  if (at >= 0) {
    let from = at;
    let to = at + record.title.length;
    if (from > 0 && '„“"»'.includes(question[from - 1]!)) from--;
    if (to < question.length && '“”"«'.includes(question[to]!)) to++;
    rest = `${question.slice(0, from)} ${question.slice(to)}`;
  }
  let fields = fieldsIn(rest, kind);
  if (Object.keys(fields).length === 0) fields = fieldsByMarker(rest, kind);
  const changed = Object.fromEntries(Object.entries(fields).filter(([f, v]) => v !== '' && textOf(record[f]) !== v));
  if (Object.keys(fields).length === 0) {
    return {
      kind: 'unclear',
      reason:
        `Ich habe den Eintrag ${KIND_LABELS[kind]} „${record.title}“ gefunden, aber nicht erkannt, welches Feld welchen neuen ` +
        `Wert bekommen soll. ${HOW}`,
    };
  }
  if (Object.keys(changed).length === 0)
    return { kind: 'unclear', reason: `Beim Eintrag ${KIND_LABELS[kind]} „${record.title}“ steht das schon so; es gibt nichts zu ändern.` };
  const before = Object.fromEntries(Object.keys(changed).map((f) => [f, textOf(record[f])]));
  const description = `Eintrag ${KIND_LABELS[kind]} „${record.title}“ (${record.id}) ändern: ${Object.entries(changed)
    .map(([f, v]) => `${fieldLabel(kind, f)} von ${before[f] ? `„${before[f]}“` : '(leer)'} auf „${v}“`)
    .join(', ')}.`;
  return { kind: 'action', action: { kind, operation: 'update', record_id: record.id, fields: changed, before, description } };
}

/** Applies one change to the in-memory workspace; returns the record as it now is. */
export function applyChange(workspace: Workspace, change: Pick<WorkspaceChange, 'kind' | 'operation' | 'record'>): WorkspaceRecord | null {
  if (!(WORKSPACE_KINDS as readonly string[]).includes(change.kind) || typeof change.record?.id !== 'string') return null;
  const list = workspace[change.kind];
  const index = list.findIndex((r) => r.id === change.record.id);
  if (change.operation === 'update' && index < 0) return null; // the record is gone (other fixtures): nothing to update
  if (change.operation === 'create') {
    if (typeof change.record.title !== 'string') return null;
    if (index >= 0) list[index] = change.record;
    else list.push(change.record);
    return change.record;
  }
  const merged = { ...list[index]!, ...change.record };
  list[index] = merged;
  return merged;
}
