/**
 * Issue 45.6: the README became a guide that links into docs/, and the reference pages link to each other. A link
 * that names a file that is not there, or a heading the page does not have, is a dead end for the reader: every
 * relative link of the README and docs/ must resolve, its #anchor by GitHub's slug of the headings.
 */
import { existsSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { DOC_FILES, docText } from '../helpers/docs.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** GitHub's anchor for a heading: lowercase, punctuation dropped except - and _, spaces as -. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors of a page: each heading's slug, a repeated one with -1, -2, … as GitHub numbers them. */
function anchorsOf(text: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const [, heading] of outsideFences(text).matchAll(/^#{1,6} (.+)$/gm)) {
    const base = slug(heading!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/** The lines outside fenced blocks: a `#` line inside one is a comment, not a heading, and a `](` there no link. */
function outsideFences(text: string): string {
  let fence: string | null = null;
  return text
    .split('\n')
    .filter((line) => {
      const m = /^(\s*)```/.exec(line);
      if (fence === null) {
        if (m) fence = m[1]!;
        return !m;
      }
      if (m && m[1] === fence && /^\s*```\s*$/.test(line)) fence = null;
      return false;
    })
    .join('\n');
}

/** Every link target of a page that is neither absolute (`https:`, `mailto:`) nor a bare URL. */
function relativeLinks(text: string): string[] {
  return [
    ...outsideFences(text)
      .replace(/`[^`\n]*`/g, '``')
      .matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g),
  ]
    .map((m) => m[1]!)
    .filter((t) => !/^[a-z][a-z0-9+.-]*:/i.test(t));
}

/** What is wrong with `target` as written in `file`, or null when it resolves. */
function problemOf(file: string, target: string): string | null {
  const [path, anchor] = target.split('#', 2) as [string, string | undefined];
  const resolved = path === '' ? file : normalize(join(dirname(file), decodeURIComponent(path)));
  if (resolved.startsWith('..')) return `${target} leaves the repository`;
  if (!existsSync(join(ROOT, resolved))) return `${target}: no such file ${resolved}`;
  if (anchor === undefined) return null;
  if (!resolved.endsWith('.md')) return `${target}: an anchor into a file that is not Markdown`;
  const text = DOC_FILES.includes(resolved) ? docText(resolved) : null;
  if (text === null) return `${target}: ${resolved} is not one of the documents read here`;
  return anchorsOf(text).has(anchor) ? null : `${target}: ${resolved} has no heading whose anchor is #${anchor}`;
}

describe('45.6 links of the README and docs/', () => {
  it("GitHub's slug: lowercase, punctuation dropped except - and _, spaces as -", () => {
    expect(slug('The agent plane: MCP at `{base_url}/mcp`')).toBe('the-agent-plane-mcp-at-base_urlmcp');
    expect(slug('`localhost` and `[::1]`')).toBe('localhost-and-1');
    expect(slug('Answering like a real server: `serve --profile`')).toBe('answering-like-a-real-server-serve---profile');
    expect(slug('Prüfung: Größe')).toBe('prüfung-größe');
  });

  it('45.6: every relative link in the README and docs/ resolves', () => {
    const problems: string[] = [];
    let links = 0;
    for (const file of DOC_FILES)
      for (const target of relativeLinks(docText(file))) {
        links++;
        const problem = problemOf(file, target);
        if (problem) problems.push(`${file}: ${problem}`);
      }
    expect(problems).toEqual([]);
    // The README alone links to every page of docs/: a reader of the guide reaches each.
    const fromReadme = new Set(relativeLinks(docText('README.md')).map((t) => normalize(t.split('#')[0]!)));
    expect(DOC_FILES.filter((f) => f !== 'README.md' && !fromReadme.has(f)).map((f) => relative(ROOT, join(ROOT, f)))).toEqual([]);
    expect(links).toBeGreaterThan(40);
  });
});
