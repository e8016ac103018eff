import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
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
 * The command line runs from one bundle (rolldown.config.js): a trace of it shows chunks, not modules. This answers
 * each chunk of `dist/bundle/` as the modules in it (dist/bundle/modules.json, written with the bundle), as file
 * URLs of where they are built or installed, and every other URL as it is. A chunk counts whole: a module that shares
 * a chunk with one a command needs is loaded with it.
 */
export async function unbundled(urls: readonly string[]): Promise<string[]> {
  const chunks = JSON.parse(await readFile(new URL('modules.json', BUNDLE), 'utf8')) as Record<string, string[]>;
  const out = new Set<string>();
  for (const url of urls) {
    if (!url.startsWith(BUNDLE.href)) {
      out.add(url);
      continue;
    }
    const name = url.slice(BUNDLE.href.length);
    const modules = chunks[name];
    // Not a chunk: dist/bundle/esm/import.cjs, which the build writes beside them.
    if (name.includes('/')) {
      out.add(url);
      continue;
    }
    if (!modules) throw new Error(`${url} is not a chunk of the bundle: build again`);
    for (const module of modules) out.add(new URL(module, ROOT).href);
  }
  return [...out];
}
