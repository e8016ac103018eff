import { createRequire } from 'node:module';
import { Command } from 'commander';
import { chargesCommand } from './commands/charges.js';
import { grantsCommand } from './commands/grants.js';
import { serveCommand } from './commands/serve.js';
import { EXIT, failWith } from './errors.js';

const { version } = createRequire(import.meta.url)('../../package.json') as { version: string };

/** The `agent-access` program. Commands load their heavy modules only when they run. */
export function buildProgram(): Command {
  const program = new Command('agent-access')
    .description('Dev kit and local emulator for the Agent Access Service')
    .version(version)
    .addCommand(serveCommand())
    .addCommand(grantsCommand())
    .addCommand(chargesCommand());
  applyConventions(program);
  return program;
}

/** Every command, nested ones included: usage errors exit 2 and show help (commander's addCommand does not inherit this). */
function applyConventions(command: Command): void {
  command.showHelpAfterError().exitOverride((err) => {
    process.exit(err.exitCode === 0 ? EXIT.ok : EXIT.usage);
  });
  command.commands.forEach(applyConventions);
}

buildProgram().parseAsync(process.argv).catch(failWith);
