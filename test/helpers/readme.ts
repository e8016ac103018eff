/** The README's tables, read as the tests that keep them true to the code need them. */
import { readFileSync } from 'node:fs';
import { expect } from 'vitest';

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');

/** The rows of every table in the README section under `heading`, each as its cells. */
export function tablesUnder(heading: string): string[][][] {
  const start = readme.indexOf(`\n${heading}\n`);
  expect(start, `README has no section "${heading}"`).toBeGreaterThan(-1);
  const rest = readme.slice(start + heading.length + 2);
  const section = rest.slice(0, rest.search(/\n#{1,3} /) === -1 ? undefined : rest.search(/\n#{1,3} /));
  const tables: string[][][] = [];
  let table: string[][] | null = null;
  for (const line of section.split('\n')) {
    if (!line.startsWith('|')) {
      table = null;
      continue;
    }
    const cells = line
      .slice(1, -1)
      .split('|')
      .map((c) => c.trim());
    if (cells.every((c) => /^-+$/.test(c))) continue;
    if (!table) tables.push((table = []));
    table.push(cells);
  }
  // Without the header row.
  return tables.map((t) => t.slice(1));
}
