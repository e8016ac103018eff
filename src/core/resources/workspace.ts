import { textOf } from '../../protocol/format.js';
/** Spec 2.7, 9: the seven kinds of the person's workspace that `ask` reads (once per-kind read scopes). */
export const WORKSPACE_KINDS = ['documents', 'contacts', 'places', 'work_items', 'listings', 'animals', 'letters'] as const;
export type WorkspaceKind = (typeof WORKSPACE_KINDS)[number];

/** German names of the kinds, singular, as answers and sources show them. */
export const KIND_LABELS: Record<WorkspaceKind, string> = {
  documents: 'Dokument',
  contacts: 'Kontakt',
  places: 'Ort',
  work_items: 'Aufgabe',
  listings: 'Inserat',
  animals: 'Tier',
  letters: 'Brief',
};

/** A workspace record: `id` and `title` always; the other fields depend on the kind (see fixtures/workspace). */
export interface WorkspaceRecord {
  id: string;
  title: string;
  [field: string]: unknown;
}

export type Workspace = Record<WorkspaceKind, WorkspaceRecord[]>;

/** A Markdown document of the knowledge base (fixtures/knowledge, or a training document once indexed). */
export interface KnowledgeDocument {
  id: string;
  title: string;
  /** The name shown to people, e.g. `hausordnung.md`. */
  file_name: string;
  content: string;
  /** The person whose training document this is; absent for the shared knowledge base. */
  owner?: string;
}

export const emptyWorkspace = (): Workspace => Object.fromEntries(WORKSPACE_KINDS.map((k) => [k, []])) as unknown as Workspace;

/** All text of a record except its id, for indexing and snippets. */
export function recordText(record: WorkspaceRecord): string {
  return Object.entries(record)
    .filter(([key]) => key !== 'id' && key !== 'title')
    .map(([, value]) => textOf(value))
    .filter((text) => text.length > 0)
    .join(' · ');
}

/** Splits Markdown into sections at `##` headings, each keeping the document title for context. */
export function markdownSections(doc: KnowledgeDocument): Array<{ heading: string; text: string }> {
  const sections: Array<{ heading: string; text: string }> = [];
  let heading = doc.title;
  let lines: string[] = [];
  const flush = () => {
    const text = lines.join('\n').trim();
    if (text) sections.push({ heading, text });
  };
  for (const line of doc.content.split('\n')) {
    const match = /^#{1,3}\s+(.*)$/.exec(line);
    if (match) {
      flush();
      heading = match[1]!.trim();
      lines = [];
    } else {
      lines.push(line);
    }
  }
  flush();
  return sections;
}

/** The first `# ` heading, else the file name without extension. */
export function markdownTitle(content: string, fileName: string): string {
  return /^#\s+(.+)$/m.exec(content)?.[1]?.trim() ?? fileName.replace(/\.[^.]+$/, '');
}
