import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { compileCacheDir, useCompileCache } from './compile-cache.js';
import { atV8FlagDefaults, holdYoungGeneration } from './heap-settings.js';

// Before any other chunk of the bundle loads; run from tsc's output (no .cjs beside it), it changes nothing.
const cacheDir = compileCacheDir();
if (cacheDir) useCompileCache({ bundleDir: dirname(fileURLToPath(import.meta.url)), cacheDir, atV8FlagDefaults });
holdYoungGeneration();

// A failure exits at once; success leaves the process to end by itself, so `serve` keeps running. Not a top-level
// await: the command line runs from a CommonJS bundle (rolldown.config.js).
void import('./program.js')
  .then(({ run }) => run(process.argv.slice(2)))
  .then((code) => {
    if (code !== 0) process.exit(code);
  });
