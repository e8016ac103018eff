#!/usr/bin/env node
'use strict';
// CommonJS (bin/package.json), like the bundle it loads: an ES module here would start Node's ES module loader,
// about 18 ms of every command line on Node 20. The bundle's first chunk sets up the compile caches
// (src/cli/main.ts).
require('../dist/bundle/main.cjs');
