#!/usr/bin/env node
import module from 'node:module';

// Node >= 22.1 caches compiled code between runs; older versions simply skip it.
module.enableCompileCache?.();
await import('../dist/cli/main.js');
