#!/usr/bin/env node
import module from 'node:module';

// Node >= 22.1 caches compiled code between runs; older versions simply skip it.
module.enableCompileCache?.();
// The command line as one bundle (rolldown.config.js): a start reads a few files instead of hundreds.
await import('../dist/bundle/main.js');
