import { run } from './program.js';
import { holdYoungGeneration } from './heap-settings.js';

holdYoungGeneration();

// A failure exits at once; success leaves the process to end by itself, so `serve` keeps running.
const code = await run(process.argv.slice(2));
if (code !== 0) process.exit(code);
