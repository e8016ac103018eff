// The command line as one bundle of tsc's output (npm run build; bin/agent-access.js loads dist/bundle/main.cjs).
// Node resolves, reads and compiles each of the about 350 files `serve` loads one by one, fastify's CommonJS files
// most of them; from about 50 files the same code starts about a quarter sooner (docs/bench.md). The library
// (dist/index.js) stays unbundled: a test suite that imports it shares its dependencies with the caller.
import path from 'node:path';
import process from 'node:process';
import { defineConfig } from 'rolldown';
import { parseAst } from 'rolldown/parseAst';

/**
 * Left to Node, each a dependency of ours that resolves from here in any install:
 * - `open`, which finds its bundled xdg-open beside its own file;
 * - what fastify requires only when it is used: the schema compilers, ajv and fastify's two (a start uses the code
 *   `npm run build` generated, dist/generated/route-schemas.cjs), and light-my-request (`inject`). In the bundle they
 *   would be read and parsed at every start, about 350 kB of the 1.3 MB that `serve` loads.
 */
const PACKAGES = /^(open|ajv|@fastify\/ajv-compiler|@fastify\/fast-json-stringify-compiler|light-my-request)(\/|$)/;

/**
 * The dashboard (`dashboard`, `serve --ui`) stays tsc's ES modules, imported from the bundle as
 * `../dashboard/*.js`: Ink and yoga are ES modules, yoga with a top-level await, which a CommonJS bundle can neither
 * hold nor require.
 */
const DASHBOARD = path.resolve('dist/dashboard') + path.sep;
const dashboardAsItIs = {
  name: 'dashboard-as-it-is',
  resolveId(source, importer) {
    if (!importer || !source.startsWith('.')) return null;
    const file = path.resolve(path.dirname(importer), source);
    if (!file.startsWith(DASHBOARD)) return null;
    return { id: `../dashboard/${path.relative(DASHBOARD, file).split(path.sep).join('/')}`, external: 'absolute' };
  },
};

/**
 * Every `import()` of a chunk goes through dist/bundle/esm/import.cjs, which Node's own loader compiles: code compiled
 * through node:vm, as src/cli/compile-cache.ts compiles the chunks, has no loader for `import()` on Node 20, and
 * asking Node for one warns on Node 22 and 24. The chunks are in the folder above it, so a relative specifier is
 * resolved from there.
 */
const ESM_IMPORT = 'esm/import.cjs';

/** The `import(` of each ImportExpression in `ast`, as [start, end) of the text before its specifier. */
function importCalls(node, found = []) {
  if (Array.isArray(node)) for (const child of node) importCalls(child, found);
  else if (node && typeof node === 'object') {
    if (node.type === 'ImportExpression') found.push([node.start, node.source.start]);
    for (const [key, child] of Object.entries(node)) if (key !== 'type' && typeof child === 'object') importCalls(child, found);
  }
  return found;
}

const esmImports = {
  name: 'esm-imports',
  renderChunk(code) {
    if (!code.includes('import(')) return null;
    const calls = importCalls(parseAst(code));
    if (calls.length === 0) return null;
    let out = '';
    let at = 0;
    for (const [start, end] of calls.sort((a, b) => a[0] - b[0])) {
      out += `${code.slice(at, start)}require("./${ESM_IMPORT}")(`;
      at = end;
    }
    return { code: out + code.slice(at) };
  },
  generateBundle() {
    this.emitFile({
      type: 'asset',
      fileName: ESM_IMPORT,
      source: [
        `'use strict';`,
        `// Written by rolldown.config.js: import() for the chunks of the folder above, from code Node compiled itself.`,
        `const { pathToFileURL } = require('node:url');`,
        `const chunks = pathToFileURL(require('node:path').join(__dirname, '..') + '/');`,
        `module.exports = (specifier, options) => import(specifier.startsWith('.') ? new URL(specifier, chunks).href : specifier, options);`,
        ``,
      ].join('\n'),
    });
  },
};

/**
 * Writes dist/bundle/modules.json: each chunk and the modules (paths from the package root) in it. Tests that check
 * what a command line loads map the chunks they see back to the modules.
 */
const moduleMap = {
  name: 'module-map',
  generateBundle(_options, bundle) {
    const chunks = {};
    for (const [file, chunk] of Object.entries(bundle)) {
      if (chunk.type !== 'chunk') continue;
      chunks[file] = Object.keys(chunk.modules)
        .filter((id) => path.isAbsolute(id))
        .map((id) => path.relative(process.cwd(), id).split(path.sep).join('/'));
    }
    this.emitFile({ type: 'asset', fileName: 'modules.json', source: `${JSON.stringify(chunks, null, 1)}\n` });
  },
};

export default defineConfig({
  input: { main: 'dist/cli/main.js' },
  platform: 'node',
  external: PACKAGES,
  plugins: [dashboardAsItIs, esmImports, moduleMap],
  // CommonJS: Node 20 loads a chunk with one synchronous compile and run, where an ES module goes through the
  // loader's resolve, link and evaluate steps (about 17 ms of a start, docs/bench.md).
  output: {
    dir: 'dist/bundle',
    format: 'cjs',
    // tsc's ES modules are strict code, and stay so in CommonJS chunks: rolldown's default adds the directive only
    // where a source had one, which none of tsc's output has.
    strict: true,
    entryFileNames: '[name].cjs',
    chunkFileNames: '[name]-[hash].cjs',
    cleanDir: true,
  },
});
