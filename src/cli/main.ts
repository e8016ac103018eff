import { createRequire } from 'node:module';
import { Command } from 'commander';
import { grantsCommand } from './commands/grants.js';
import { serveCommand } from './commands/serve.js';
import { EXIT, failWith } from './errors.js';

const { version } = createRequire(import.meta.url)('../../package.json') as { version: string };

/** The `agent-access` program. Commands load their heavy modules only when they run. */
export function buildProgram(): Command {
  return new Command('agent-access')
    .description('Dev kit and local emulator for the Agent Access Service')
    .version(version)
    .showHelpAfterError()
    .configureOutput({ outputError: (text, write) => write(text) })
    .exitOverride((err) => {
      process.exit(err.exitCode === 0 ? EXIT.ok : EXIT.usage);
    })
    .addCommand(serveCommand())
    .addCommand(grantsCommand());
}

buildProgram().parseAsync(process.argv).catch(failWith);
