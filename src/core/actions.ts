import { KIND_LABELS, WORKSPACE_KINDS, type Workspace, type WorkspaceKind, type WorkspaceRecord } from './workspace.js';

/**
 * Spec 2.7 `workspace.write`, 4.4 rule 1: a change the agent asked for, which waits for the person.
 * pending → approved | rejected (the person, on `{auth_url}/actions/{id}`) → applied (continue_ask).
 */
export interface PendingAction {
  id: string;
  client_id: string;
  grant_id: string;
  person_id: string;
  question: string;
  kind: WorkspaceKind;
  operation: 'create' | 'update';
  /** The record changed (update) or the id the new record gets (create). */
  record_id: string;
  /** The fields written; for an update, only the changed ones. */
  fields: Record<string, string>;
  /** For an update: the values before, to show the person what changes. */
  before?: Record<string, string>;
  /** German, exactly what will change. */
  description: string;
  status: 'pending' | 'approved' | 'rejected' | 'applied';
  created_at: number;
  decided_at?: number;
  applied_at?: number;
}

/** One applied change, kept in the state file and replayed over the fixtures on start. */
export interface WorkspaceChange {
  action_id: string;
  at: number;
  kind: WorkspaceKind;
  operation: 'create' | 'update';
  record: WorkspaceRecord;
}

/** German words that name a kind when a change is asked for (README: write actions). */
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
  contacts: { title: ['Name'], company: ['Firma', 'Unternehmen'], role: ['Rolle', 'Funktion'], email: ['E-Mail', 'Email', 'Mail', 'E-Mail-Adresse'], phone: ['Telefon', 'Telefonnummer', 'Tel', 'Handy', 'Handynummer', 'Mobil', 'Mobilnummer'], city: ['Ort', 'Stadt', 'Wohnort'], notes: ['Notiz', 'Notizen', 'Bemerkung'] },
  work_items: { title: ['Titel'], description: ['Beschreibung'], status: ['Status'], due: ['Fälligkeit', 'fällig', 'Frist', 'Termin', 'Fälligkeitsdatum'], assignee: ['Zuständig', 'Zuständige', 'Zuständiger', 'Bearbeiter', 'verantwortlich'] },
  letters: { title: ['Betreff', 'Titel'], sender: ['Absender'], recipient: ['Empfänger', 'Empfängerin'], date: ['Datum'], body: ['Text', 'Inhalt'] },
  documents: { title: ['Titel'], summary: ['Zusammenfassung'], content: ['Inhalt', 'Text'], tags: ['Schlagworte', 'Tags'] },
  places: { title: ['Name'], address: ['Adresse', 'Anschrift'], city: ['Ort', 'Stadt'], category: ['Kategorie'], notes: ['Notiz', 'Notizen'] },
  listings: { title: ['Titel'], description: ['Beschreibung'], price_eur: ['Preis', 'Miete'], location: ['Lage'], status: ['Status'] },
  animals: { title: ['Name'], species: ['Tierart', 'Art'], breed: ['Rasse'], born: ['Geburtsdatum', 'geboren'], owner: ['Besitzer', 'Besitzerin', 'Halter', 'Eigentümer'], notes: ['Notiz', 'Notizen'] },
};

const fieldLabel = (kind: WorkspaceKind, field: string): string => FIELD_WORDS[kind][field]?.[0] ?? field;
const escapeRe = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

const QUOTED = /[„“"»«‚‘'’]([^„“”"»«‚‘’']{1,200})[“”"«»‘’']/;
const CREATE_VERB = /(?<!\p{L})(erstell|anleg|leg\w*\b.*\ban\b|hinzufüg|füg\w*\b.*\bhinzu\b|trag\w*\b.*\bein\b|schreib|verfass|neue[nrs]?\b)/iu;
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

/** `Feld: Wert` pairs (or `Feld „Wert“`), each value running to the next field or the end. */
function fieldsIn(text: string, kind: WorkspaceKind): Record<string, string> {
  const words = Object.entries(FIELD_WORDS[kind]).flatMap(([field, names]) => names.map((name) => ({ field, name })));
  words.sort((a, b) => b.name.length - a.name.length);
  const pattern = new RegExp(`(?:^|[\\s,;(])(${words.map((w) => escapeRe(w.name)).join('|')})(?:\\s*[:=]\\s*|\\s+(?=[„“"»]))`, 'gi');
  const hits = [...text.matchAll(pattern)].map((m) => ({ name: m[1]!, start: m.index!, valueStart: m.index! + m[0].length }));
  const fields: Record<string, string> = {};
  hits.forEach((hit, i) => {
    const end = i + 1 < hits.length ? hits[i + 1]!.start : text.length;
    const field = words.find((w) => w.name.toLowerCase() === hit.name.toLowerCase())!.field;
    const value = cleanValue(text.slice(hit.valueStart, end));
    if (value) fields[field] = value;
  });
  return fields;
}

function cleanValue(raw: string): string {
  let value = raw.trim().replace(/(\s+und)?[\s,;.!?]*$/i, '').trim();
  const quoted = QUOTED.exec(value);
  if (quoted && quoted.index === 0) value = quoted[1]!;
  return value.replace(/^[„“"»'‚]|[“”"«'’]$/g, '').trim();
}

/** The record a question names: the longest title (of the kind, if named) that the question contains. */
function findRecord(question: string, workspace: Workspace, kind?: WorkspaceKind): { kind: WorkspaceKind; record: WorkspaceRecord } | undefined {
  const text = question.toLowerCase();
  let best: { kind: WorkspaceKind; record: WorkspaceRecord } | undefined;
  for (const k of kind ? [kind] : WORKSPACE_KINDS) {
    for (const record of workspace[k]) {
      const title = record.title.toLowerCase();
      if (title.length >= 3 && text.includes(title) && (!best || title.length > best.record.title.length)) best = { kind: k, record };
    }
  }
  return best;
}

const HOW =
  'Nennen Sie die Art des Eintrags (Kontakt, Aufgabe, Brief, Dokument, Ort, Inserat oder Tier), den Namen oder Titel in Anführungszeichen und die Felder mit Doppelpunkt, ' +
  'zum Beispiel: Lege einen Kontakt „Anna Schmidt“ an, Telefon: 0171 2345678, Ort: München. Oder: Ändere beim Kontakt „Josef Huber“ die Telefonnummer auf „+49 170 1234567“.';

/**
 * Turns a German request for a change into exactly one action, or says what is missing. Deterministic:
 * the same question and workspace always give the same plan (README: write actions, with examples).
 */
export function planChange(question: string, workspace: Workspace, newRecordId: (kind: WorkspaceKind) => string): Plan {
  if (UNSUPPORTED_VERB.test(question) && !CREATE_VERB.test(question) && !UPDATE_VERB.test(question)) {
    return { kind: 'unclear', reason: 'Löschen, Versenden, Kündigen oder Buchen bietet die Agentenebene nicht an; möglich sind das Anlegen und das Ändern einzelner Einträge.' };
  }
  const named = kindIn(question);
  const target = findRecord(question, workspace, named);
  if (UPDATE_VERB.test(question) && target) return planUpdate(question, target.kind, target.record);
  if (CREATE_VERB.test(question)) {
    if (!named) return { kind: 'unclear', reason: `Ich konnte nicht erkennen, welche Art von Eintrag angelegt werden soll. ${HOW}` };
    const fields = fieldsIn(question, named);
    const quoted = QUOTED.exec(question)?.[1]?.trim();
    const title = fields.title ?? quoted ?? /\b(?:namens|mit dem (?:namen|titel))\s+([^,;.]+)/i.exec(question)?.[1]?.trim();
    if (!title) return { kind: 'unclear', reason: `Mir fehlt der Name oder Titel des neuen Eintrags. ${HOW}` };
    const record_id = newRecordId(named);
    const all = { ...fields, title };
    const details = Object.entries(all).filter(([f]) => f !== 'title');
    const description =
      `Neuen Eintrag der Art ${KIND_LABELS[named]} „${title}“ anlegen` +
      (details.length ? ` mit ${details.map(([f, v]) => `${fieldLabel(named, f)} „${v}“`).join(', ')}.` : ' (ohne weitere Angaben).');
    return { kind: 'action', action: { kind: named, operation: 'create', record_id, fields: all, description } };
  }
  if (UPDATE_VERB.test(question)) return { kind: 'unclear', reason: `Ich habe keinen Eintrag gefunden, dessen Name oder Titel in der Anfrage vorkommt. ${HOW}` };
  return { kind: 'unclear', reason: `Ich konnte nicht eindeutig erkennen, was geändert werden soll. ${HOW}` };
}

function planUpdate(question: string, kind: WorkspaceKind, record: WorkspaceRecord): Plan {
  // What surrounds the record's title holds the fields; the title (and its quotes) must not be read as a value.
  const titled = new RegExp(`[„“"»]?${escapeRe(record.title)}[“”"«]?`, 'i');
  const rest = question.replace(titled, ' ');
  let fields = fieldsIn(rest, kind);
  if (Object.keys(fields).length === 0) {
    // "… die Telefonnummer … auf „X“", "… als erledigt": a field word, then the value after auf/zu/als/in.
    const words = Object.entries(FIELD_WORDS[kind]).flatMap(([field, names]) => names.map((name) => ({ field, name })));
    words.sort((a, b) => b.name.length - a.name.length);
    let field: string | undefined;
    let from = 0;
    for (const w of words) {
      const at = rest.search(new RegExp(`(?<!\\p{L})${escapeRe(w.name)}(?!\\p{L})`, 'iu'));
      if (at >= 0) {
        field = w.field;
        from = at + w.name.length;
        break;
      }
    }
    if (!field && /(?<!\p{L})als\s/iu.test(rest) && FIELD_WORDS[kind].status) field = 'status';
    const tail = rest.slice(from).replace(/\s+(?:ändern|setzen|aktualisieren|verschieben|markieren|umtragen)?[\s.!?]*$/iu, '');
    const value = /(?<!\p{L})(?:auf|zu|als|in)\s+(.+)$/iu.exec(tail);
    if (field && value) fields = { [field]: cleanValue(value[1]!.replace(/^(?:den|die|das|dem)\s+(?=\d)/i, '')) };
  }
  const changed = Object.fromEntries(Object.entries(fields).filter(([f, v]) => v !== '' && String(record[f] ?? '') !== v));
  if (Object.keys(fields).length === 0) {
    return { kind: 'unclear', reason: `Ich habe den Eintrag ${KIND_LABELS[kind]} „${record.title}“ gefunden, aber nicht erkannt, welches Feld welchen neuen Wert bekommen soll. ${HOW}` };
  }
  if (Object.keys(changed).length === 0) return { kind: 'unclear', reason: `Beim Eintrag ${KIND_LABELS[kind]} „${record.title}“ steht das schon so; es gibt nichts zu ändern.` };
  const before = Object.fromEntries(Object.keys(changed).map((f) => [f, String(record[f] ?? '')]));
  const description = `Eintrag ${KIND_LABELS[kind]} „${record.title}“ (${record.id}) ändern: ${Object.entries(changed)
    .map(([f, v]) => `${fieldLabel(kind, f)} von ${before[f] ? `„${before[f]}“` : '(leer)'} auf „${v}“`)
    .join(', ')}.`;
  return { kind: 'action', action: { kind, operation: 'update', record_id: record.id, fields: changed, before, description } };
}

/** Applies one change to the in-memory workspace; returns the record as it now is. */
export function applyChange(workspace: Workspace, change: Pick<WorkspaceChange, 'kind' | 'operation' | 'record'>): WorkspaceRecord {
  const list = workspace[change.kind];
  const index = list.findIndex((r) => r.id === change.record.id);
  if (change.operation === 'create' || index < 0) {
    if (index >= 0) list[index] = change.record;
    else list.push(change.record);
    return change.record;
  }
  const merged = { ...list[index]!, ...change.record };
  list[index] = merged;
  return merged;
}
