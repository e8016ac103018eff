import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join, posix } from 'node:path';
import { pathToFileURL } from 'node:url';

/**
 * Node module hooks, run in Node's hooks thread: every URL an import resolves to is appended to the file named by
 * `data.out` of `register(url, { data: { out } })`. Tests use it to see what a real run of the build loads.
 */
const RESOLVE_HOOKS = `
import { appendFileSync } from 'node:fs';
let out;
export function initialize(data) { out = data.out; }
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  appendFileSync(out, result.url + '\\n');
  return result;
}
`;

/** Writes the hooks into `dir` as hooks.mjs and answers their file URL. */
export async function writeResolveHooks(dir: string): Promise<string> {
  const file = join(dir, 'hooks.mjs');
  await writeFile(file, RESOLVE_HOOKS);
  return pathToFileURL(file).href;
}

const ROOT = new URL('../../', import.meta.url);
const BUNDLE = new URL('dist/bundle/', ROOT);

/**
 * Each chunk of the bundle in `root`'s dist/bundle/ and the modules in it (paths from the package root), read from
 * the source maps the build writes beside the chunks (rolldown.config.js).
 */
export async function bundleChunks(root = ROOT.pathname): Promise<Record<string, string[]>> {
  const dir = join(root, 'dist/bundle');
  const chunks: Record<string, string[]> = {};
  for (const file of await readdir(dir)) {
    if (!file.endsWith('.cjs')) continue;
    // A chunk of rolldown's own helpers only has no map.
    const map = await readFile(join(dir, `${file}.map`), 'utf8').catch(() => '{"sources":[]}');
    chunks[file] = (JSON.parse(map) as { sources: string[] }).sources.map((source) => posix.join('dist/bundle', source));
  }
  return chunks;
}

/**
 * The command line runs from one bundle (rolldown.config.js): a trace of it shows chunks, not modules. This answers
 * each chunk of `dist/bundle/` as the modules in it, as file URLs of where they are built or installed, and every
 * other URL as it is. A chunk counts whole: a module that shares a chunk with one a command needs is loaded with it.
 */
export async function unbundled(urls: readonly string[]): Promise<string[]> {
  const chunks = await bundleChunks();
  const out = new Set<string>();
  for (const url of urls) {
    if (!url.startsWith(BUNDLE.href)) {
      out.add(url);
      continue;
    }
    const modules = chunks[url.slice(BUNDLE.href.length)];
    if (!modules) throw new Error(`${url} is not a chunk of the bundle: build again`);
    for (const module of modules) out.add(new URL(module, ROOT).href);
  }
  return [...out];
}
