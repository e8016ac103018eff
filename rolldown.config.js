// The command line as one bundle of tsc's output (npm run build; bin/agent-access.js loads dist/bundle/main.js).
// Node resolves, reads and compiles each of the about 350 files `serve` loads one by one, fastify's CommonJS files
// most of them; from about 50 files the same code starts about a quarter sooner (docs/bench.md). The library
// (dist/index.js) stays unbundled: a test suite that imports it shares its dependencies with the caller.
import path from 'node:path';
import process from 'node:process';
import { defineConfig } from 'rolldown';

/**
 * Left to Node, each a dependency of ours that resolves from here in any install:
 * - the dashboard's packages, loaded with --ui and `dashboard` only (ink and yoga rely on their own module layout);
 * - `open`, which finds its bundled xdg-open beside its own file;
 * - what fastify requires only when it is used: the schema compilers (a start uses the code `npm run build`
 *   generated, dist/generated/route-schemas.cjs) and light-my-request (`inject`). In the bundle they would be read
 *   and parsed at every start, about 350 kB of the 1.3 MB that `serve` loads.
 */
const EXTERNAL =
  /^(ink|react|react-dom|react-devtools-core|yoga-layout|open|ajv|@fastify\/ajv-compiler|@fastify\/fast-json-stringify-compiler|light-my-request)(\/|$)/;

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
  // The state writer runs in a worker thread of its own, started from its file beside the chunk that starts it.
  input: { main: 'dist/cli/main.js', 'state-writer': 'dist/store/state-writer.js' },
  platform: 'node',
  external: EXTERNAL,
  plugins: [moduleMap],
  output: {
    dir: 'dist/bundle',
    format: 'esm',
    entryFileNames: '[name].js',
    chunkFileNames: '[name]-[hash].js',
    cleanDir: true,
  },
});
