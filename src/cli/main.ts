import { run } from './program.js';
import { holdYoungGeneration } from './heap-settings.js';

holdYoungGeneration();

// A failure exits at once; success leaves the process to end by itself, so `serve` keeps running. Not a top-level
// await: the command line runs from a CommonJS bundle (rolldown.config.js).
void run(process.argv.slice(2)).then((code) => {
  if (code !== 0) process.exit(code);
});
