// The command line as one bundle of tsc's output (npm run build; bin/agent-access.js loads dist/bundle/main.cjs).
// Node resolves, reads and compiles each of the about 350 files `serve` loads one by one, fastify's CommonJS files
// most of them; from about 50 files the same code starts sooner, on Node 22 and 24 too with Node's compile cache
// (docs/bench.md). The library (dist/index.js) stays unbundled: a test suite that imports it shares its dependencies
// with the caller.
import path from 'node:path';
import { defineConfig } from 'rolldown';

/**
 * Left to Node, each a dependency of ours that resolves from here in any install:
 * - `open`, which finds its bundled xdg-open beside its own file;
 * - what fastify requires only when it is used: the schema compilers, ajv and fastify's two (a start uses the code
 *   `npm run build` generated, dist/generated/route-schemas.cjs), and light-my-request (`inject`). In the bundle they
 *   would be read and parsed at every start, about 350 kB of the 1.3 MB that `serve` loads.
 */
const PACKAGES = /^(open|ajv|@fastify\/ajv-compiler|@fastify\/fast-json-stringify-compiler|light-my-request)(\/|$)/;

/**
 * The dashboard (`dashboard`, `serve --ui`) stays tsc's ES modules, imported from the bundle as `../dashboard/*.js`:
 * Ink and yoga are ES modules, yoga with a top-level await, which a CommonJS bundle can neither hold nor require.
 */
const DASHBOARD = path.resolve('dist/dashboard') + path.sep;

export default defineConfig({
  input: { main: 'dist/cli/main.js' },
  platform: 'node',
  external: (id, _importer, resolved) => PACKAGES.test(id) || (resolved && id.startsWith(DASHBOARD)),
  makeAbsoluteExternalsRelative: false,
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
    // Maps without a comment in the chunks (Node reads none): tests map the chunks a command loads back to modules.
    sourcemap: 'hidden',
    sourcemapExcludeSources: true,
    // Every chunk is in dist/bundle/, so the dashboard is one folder up from each.
    paths: (id) => (id.startsWith(DASHBOARD) ? `../dashboard/${path.relative(DASHBOARD, id).split(path.sep).join('/')}` : id),
    cleanDir: true,
  },
});
