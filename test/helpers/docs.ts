/**
 * The README's and docs/'s tables and code blocks, read as the tests that keep them true to the code need them. The
 * README is the guide and docs/ the reference (issue 45.6): a test that holds a table to the code names the file the
 * table lives in, so moving the table means moving the test's eye with it, never losing the check.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readdirSync, readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'vitest';

const ROOT = new URL('../../', import.meta.url);

/** The user's documents: the README, then every page of docs/ in name order, as paths from the repository root. */
export const DOC_FILES: readonly string[] = [
  'README.md',
  ...readdirSync(new URL('docs/', ROOT))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`),
];

const texts = new Map<string, string>();
/** The text of one of DOC_FILES (read once). */
export function docText(file: string): string {
  let text = texts.get(file);
  if (text === undefined) texts.set(file, (text = readFileSync(new URL(file, ROOT), 'utf8')));
  return text;
}

/** The rows of every table in the section of `file` under `heading` (to the next heading of level 1 to 3), each as its cells. */
export function tablesUnder(file: string, heading: string): string[][][] {
  // A page's title is its first line: a newline before it finds it as any other heading.
  const text = `\n${docText(file)}`;
  const start = text.indexOf(`\n${heading}\n`);
  expect(start, `${file} has no section "${heading}"`).toBeGreaterThan(-1);
  const rest = text.slice(start + heading.length + 2);
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

/** A fenced code block of the README or a docs page: its file, language, the heading it sits under, and its text. */
export interface DocBlock {
  /** One of DOC_FILES. */
  file: string;
  lang: string;
  heading: string;
  /** The first line, trimmed: with the heading, what names the block in tests and their messages. */
  firstLine: string;
  body: string;
  /** 1-based line of the opening fence. */
  line: number;
}

/** Every fenced block of the README and docs/, file by file in order, indented ones (inside list items) included. */
export function docBlocks(): DocBlock[] {
  return DOC_FILES.flatMap(blocksOf);
}

function blocksOf(file: string): DocBlock[] {
  const blocks: DocBlock[] = [];
  let heading = '';
  let open: { lang: string; indent: string; line: number; lines: string[] } | null = null;
  docText(file)
    .split('\n')
    .forEach((line, i) => {
      const fence = /^(\s*)```(\S*)\s*$/.exec(line);
      if (open) {
        if (fence && fence[1] === open.indent && fence[2] === '') {
          const body = open.lines.join('\n') + '\n';
          blocks.push({ file, lang: open.lang, heading, firstLine: open.lines[0]?.trim() ?? '', body, line: open.line });
          open = null;
        } else open.lines.push(line.startsWith(open.indent) ? line.slice(open.indent.length) : line);
      } else if (fence) open = { lang: fence[2]!, indent: fence[1]!, line: i + 1, lines: [] };
      else if (/^#{1,6} /.test(line)) heading = line;
    });
  return blocks;
}

/** The first sh block after the first line matching `before` in the README. */
export function blockAfter(before: RegExp): string {
  const readme = docText('README.md');
  const at = readme.search(before);
  if (at < 0) throw new Error(`README has no text matching ${before}`);
  const block = /```sh\n([\s\S]*?)```/.exec(readme.slice(at));
  if (!block) throw new Error(`no sh block after ${before}`);
  return block[1]!;
}

/** The quick start's client block and the CI recipe, which test/readme-recipes.test.ts runs. */
export const QUICK_START_SERVE = /^To work on agent-access itself, from a clone/m;
export const QUICK_START_CLIENT = /Then, from another terminal, be the client/;
export const CI_RECIPE = /A CI job that runs the emulator in the background on free ports, waits for it to be ready/;

/** Runs a shell script as a job would (`set -eu`), in `dir`; killed after `limitMs`, which then shows as code null. */
export async function runScript(dir: string, script: string, env: NodeJS.ProcessEnv, limitMs: number) {
  await writeFile(join(dir, 'job.sh'), `set -eu\n${script}`);
  const child = spawn('bash', ['job.sh'], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], env });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), limitMs);
  const [code] = (await once(child, 'exit')) as [number | null];
  clearTimeout(timer);
  return { code, stdout, stderr };
}
