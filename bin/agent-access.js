#!/usr/bin/env node
'use strict';
// CommonJS (bin/package.json), like the bundle it loads: an ES module here would start Node's ES module loader,
// about 18 ms of every command line on Node 20.
const { enableCompileCache } = require('node:module');

// Node >= 22.1 caches compiled code between runs; older versions simply skip it.
enableCompileCache?.();
// The command line as one bundle (rolldown.config.js): a start reads a few files instead of hundreds.
require('../dist/bundle/main.cjs');
