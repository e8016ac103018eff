import { createRequire } from 'node:module';
import { Command, CommanderError } from 'commander';
import { processContext, type ClientContext } from '../client/context.js';
import { chargesCommand } from './commands/charges.js';
import { clockCommand } from './commands/clock.js';
import { snapshotCommand } from './commands/snapshot.js';
import { dashboardCommand } from './commands/dashboard.js';
import { clientCommands } from './commands/client.js';
import { grantsCommand } from './commands/grants.js';
import { serveCommand } from './commands/serve.js';
import { apiCommands } from './commands/api.js';
import { EXIT, describeCliError } from './errors.js';

const { version } = createRequire(import.meta.url)('../../package.json') as { version: string };

/** The `agent-access` program. Commands load their heavy modules only when they run. */
export function buildProgram(ctx: ClientContext = processContext()): Command {
  const program = new Command('agent-access')
    .description('Dev kit and local emulator for the Agent Access Service')
    .version(version)
    .addCommand(serveCommand())
    .addCommand(grantsCommand())
    .addCommand(chargesCommand())
    .addCommand(dashboardCommand(ctx))
    .addCommand(clockCommand(ctx))
    .addCommand(snapshotCommand(ctx));
  for (const command of [...clientCommands(ctx), ...apiCommands(ctx)]) program.addCommand(command);
  applyConventions(program, ctx);
  return program;
}

/** Every command, nested ones included (commander's addCommand does not inherit these): usage errors show help, output goes to the context. */
function applyConventions(command: Command, ctx: ClientContext): void {
  command
    .showHelpAfterError()
    .exitOverride()
    .configureOutput({ writeOut: (s) => void ctx.stdout.write(s), writeErr: (s) => void ctx.stderr.write(s) });
  command.commands.forEach((c) => applyConventions(c, ctx));
}

/**
 * Runs one command line (without the node and script words) and resolves with its exit code. Expected failures
 * are one line on stderr, never a stack trace; usage errors exit 2. Used by the binary and, in-process, by tests.
 */
export async function run(argv: string[], ctx: ClientContext = processContext()): Promise<number> {
  try {
    await buildProgram(ctx).parseAsync(argv, { from: 'user' });
    return EXIT.ok;
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
    const { message, exitCode } = describeCliError(error);
    ctx.stderr.write(`agent-access: ${message}\n`);
    return exitCode;
  }
}
