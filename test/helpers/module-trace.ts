import { writeFile } from 'node:fs/promises';
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
