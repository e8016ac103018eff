import { textOf } from '../../protocol/format.js';
import { WORKSPACE_KINDS, type KnowledgeDocument, type Workspace, type WorkspaceKind, type WorkspaceRecord } from '../state/entities.js';

export { WORKSPACE_KINDS, type KnowledgeDocument, type Workspace, type WorkspaceKind, type WorkspaceRecord } from '../state/entities.js';

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
