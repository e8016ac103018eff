#!/usr/bin/env node
'use strict';
/* global __dirname, process -- Node's, for a plain script */
// CommonJS (bin/package.json), like the bundle it loads: an ES module here would start Node's ES module loader,
// about 18 ms of every command line on Node 20.
const Module = require('node:module');
const path = require('node:path');
const os = require('node:os');

// Node's compile cache (22.1 and later; Node 20 has none) for every module loaded from here on. In a folder of the
// user's own rather than Node's default under the shared temp folder, where another user could have made it first.
// NODE_COMPILE_CACHE, which Node reads itself, and NODE_DISABLE_COMPILE_CACHE win. Without a usable folder, no cache.
if (!process.env.NODE_COMPILE_CACHE) {
  const cacheHome = path.isAbsolute(process.env.XDG_CACHE_HOME ?? '') ? process.env.XDG_CACHE_HOME : path.join(os.homedir(), '.cache');
  Module.enableCompileCache?.(path.join(cacheHome, 'agent-access', 'compile-cache'));
}

const bundle = path.join(__dirname, '..', 'dist', 'bundle', 'main.cjs');
try {
  require(bundle);
} catch (error) {
  // A clone that was never built: one line that says what to do, not a stack trace. Anything else is a real error.
  if (error?.code !== 'MODULE_NOT_FOUND' || !String(error.message).includes(bundle)) throw error;
  process.stderr.write('agent-access: not built yet: run `npm run build` (or `npm start`, which builds first)\n');
  process.exitCode = 1;
}
