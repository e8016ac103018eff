#!/usr/bin/env node
'use strict';
/* global __dirname, process -- Node's, for a plain script */
// CommonJS (bin/package.json), like the bundle it loads: an ES module here would start Node's ES module loader,
// about 18 ms of every command line on Node 20. The bundle's first chunk sets up the compile caches
// (src/cli/main.ts).
const path = require('node:path');
const bundle = path.join(__dirname, '..', 'dist', 'bundle', 'main.cjs');
try {
  require(bundle);
} catch (error) {
  // A clone that was never built: one line that says what to do, not a stack trace. Anything else is a real error.
  if (error?.code !== 'MODULE_NOT_FOUND' || !String(error.message).includes(bundle)) throw error;
  process.stderr.write('agent-access: not built yet: run `npm run build` (or `npm start`, which builds first)\n');
  process.exitCode = 1;
}
