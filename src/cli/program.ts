import { createRequire } from 'node:module';
import { Command, CommanderError } from 'commander';
import { processContext, type ClientContext } from '../client/context.js';
import { EXIT, describeCliError } from './errors.js';

const { version } = createRequire(import.meta.url)('../../package.json') as { version: string };

/** The modules that define the top-level commands, in the order help lists them. */
const COMMAND_MODULES: Array<{ names: readonly string[]; load: (ctx: ClientContext) => Promise<Command[]> }> = [
  { names: ['serve'], load: async () => [(await import('./commands/serve.js')).serveCommand()] },
  { names: ['grants'], load: async () => [(await import('./commands/grants.js')).grantsCommand()] },
  { names: ['charges'], load: async () => [(await import('./commands/charges.js')).chargesCommand()] },
  { names: ['dashboard'], load: async (ctx) => [(await import('./commands/dashboard.js')).dashboardCommand(ctx)] },
  { names: ['clock'], load: async (ctx) => [(await import('./commands/clock.js')).clockCommand(ctx)] },
  { names: ['snapshot'], load: async (ctx) => [(await import('./commands/snapshot.js')).snapshotCommand(ctx)] },
  { names: ['findings'], load: async (ctx) => [(await import('./commands/findings.js')).findingsCommand(ctx)] },
  {
    names: ['login', 'token', 'status', 'logout', 'decode'],
    load: async (ctx) => (await import('./commands/client.js')).clientCommands(ctx),
  },
  { names: ['ask', 'research', 'train'], load: async (ctx) => (await import('./commands/api.js')).apiCommands(ctx) },
];

/**
 * The `agent-access` program. A command line that names a command loads only the module defining it (every
 * other module is start-up time of `serve`, which is benchmarked); help, the version and unknown commands
 * load them all. Commands load their heavy modules only when they run.
 */
export async function buildProgram(ctx: ClientContext = processContext(), argv: readonly string[] = []): Promise<Command> {
  const named = COMMAND_MODULES.find((m) => m.names.includes(argv[0] ?? ''));
  const commands = (await Promise.all((named ? [named] : COMMAND_MODULES).map((m) => m.load(ctx)))).flat();
  const program = new Command('agent-access').description('Dev kit and local emulator for the Agent Access Service').version(version);
  for (const command of commands) program.addCommand(command);
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
    await (await buildProgram(ctx, argv)).parseAsync(argv, { from: 'user' });
    return EXIT.ok;
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
    const { message, exitCode } = describeCliError(error);
    ctx.stderr.write(`agent-access: ${message}\n`);
    return exitCode;
  }
}
