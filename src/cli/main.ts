import { EXIT } from './errors.js';

// The command line's entry. A failure exits at once; success leaves the process to end by itself, so `serve` keeps
// running. Not a top-level await: the command line runs from a CommonJS bundle (rolldown.config.js). A command whose
// promise never settled (nothing left to wait for: an internal error) does not end with 0, as an unsettled top-level
// await did not. 'beforeExit' comes when nothing is left to wait for, never after process.exit(), which a command may
// call itself.
let settled = false;
process.once('beforeExit', () => {
  if (!settled && !process.exitCode) {
    process.stderr.write('agent-access: the command ended before it finished (an internal error)\n');
    process.exitCode = EXIT.failure;
  }
});
void import('./program.js')
  .then(({ run }) => run(process.argv.slice(2)))
  .then((code) => {
    settled = true;
    if (code !== 0) process.exit(code);
  });
