/**
 * Text cut into sentences an answer can quote: Markdown paragraphs, list items and table rows of the knowledge
 * base, and the fields of a workspace record. Pure; run once per indexed passage.
 */

/** Words after whose full stop a sentence goes on (`Dr. Anna Berger`, `Nr. 3`, `z. B. …`). */
const ABBREVIATIONS = new Set([
  'dr',
  'nr',
  'str',
  'bzw',
  'ca',
  'z',
  'b',
  'u',
  'a',
  'd',
  'h',
  's',
  'usw',
  'etc',
  'inkl',
  'ggf',
  'evtl',
  'max',
  'min',
  'vgl',
  'abs',
  'tel',
  'fr',
  'hr',
  'st',
  'geb',
  'gem',
  'lt',
  'mind',
  'zzgl',
]);

/** Markdown inline marks dropped from quoted text: emphasis, code, links (their text stays). */
const plain = (text: string): string =>
  text
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/\*\*|__|`/g, '')
    .replace(/\s+/g, ' ')
    .trim();

/** Splits a run of prose at `.`, `!` and `?` followed by a capital or a digit, except after abbreviations and ordinals (`3. Februar`). */
export function splitProse(text: string): string[] {
  const flat = plain(text);
  const out: string[] = [];
  let start = 0;
  for (const match of flat.matchAll(/[.!?]\s+(?=[„"(]?[\p{Lu}\d])/gu)) {
    const end = match.index + 1;
    const before = flat.slice(start, end);
    const word = /([\p{L}\d]+)\.$/u.exec(before)?.[1] ?? '';
    // `3. Februar`, `1. OG`: an ordinal stands alone; `… 2026-04-22. Rechnet` ends a sentence.
    const ordinal = /(?:^|\s)\d{1,2}\.$/.test(before);
    if (match[0][0] === '.' && (ABBREVIATIONS.has(word.toLowerCase()) || ordinal)) continue;
    out.push(flat.slice(start, end).trim());
    start = match.index + match[0].length;
  }
  const rest = flat.slice(start).trim();
  if (rest) out.push(rest);
  return out.filter((s) => /[\p{L}\d]/u.test(s));
}

const cells = (row: string): string[] =>
  row
    .trim()
    .replace(/^\|/, '')
    .replace(/\|$/, '')
    .split('|')
    .map((c) => plain(c));

const isTableRow = (line: string) => /^\s*\|.*\|\s*$/.test(line);
const isTableRule = (line: string) => /^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$/.test(line);

/**
 * The sentences of a Markdown passage. A list item stands alone; a table row reads `first cell: the others`, each
 * named by its column when there are more than two (`06:30 – Boxenstall: Heu; Offenstall: Heunetze auffüllen`).
 */
export function markdownSentences(markdown: string): string[] {
  const lines = markdown.split('\n');
  const units: string[] = [];
  let paragraph: string[] = [];
  let header: string[] | undefined;
  const flush = () => {
    if (paragraph.length) units.push(paragraph.join(' '));
    paragraph = [];
  };
  lines.forEach((line, i) => {
    if (isTableRow(line)) {
      flush();
      if (isTableRule(line)) return;
      const row = cells(line);
      if (isTableRule(lines[i + 1] ?? '')) {
        header = row;
        return;
      }
      const [first, ...rest] = row;
      if (rest.length === 0) units.push(first ?? '');
      else if (rest.length === 1) units.push(`${first}: ${rest[0]}`);
      else units.push(`${first} – ${rest.map((c, j) => (header?.[j + 1] ? `${header[j + 1]}: ${c}` : c)).join('; ')}`);
      return;
    }
    header = undefined;
    const item = /^\s*(?:[-*+]|\d+\.)\s+(.*)$/.exec(line);
    if (item) {
      flush();
      units.push(item[1]!);
    } else if (line.trim() === '' || /^\s*#/.test(line)) flush();
    else paragraph.push(line.trim());
  });
  flush();
  return units.flatMap(splitProse);
}
