import { createRequire } from 'node:module';
import { Command, CommanderError, Help } from 'commander';
import { processContext, type ClientContext } from '../client/context.js';
import { EXIT, describeCliError } from './errors.js';

const { version } = createRequire(import.meta.url)('../../package.json') as { version: string };

/** One top-level command as the top-level help lists it, and how to load the real one. */
export interface CommandEntry {
  name: string;
  /** What help prints after the name: `[options]` when it has options, then its arguments. */
  usage: string;
  description: string;
  load: (ctx: ClientContext) => Promise<Command>;
}

const fromClient = (name: string) => async (ctx: ClientContext) =>
  (await import('./commands/client.js')).clientCommands(ctx).find((c) => c.name() === name)!;
const fromApi = (name: string) => async (ctx: ClientContext) =>
  (await import('./commands/api.js')).apiCommands(ctx).find((c) => c.name() === name)!;

/**
 * Every top-level command, in the order help lists them. Top-level help, the version and unknown commands are
 * answered from this table alone; a command's module (and what it imports) loads only when that command runs or
 * its own help is asked. test/unit/command-table.test.ts checks the table against the real commands.
 */
export const COMMANDS: readonly CommandEntry[] = [
  {
    name: 'serve',
    usage: '[options]',
    description: 'run the emulated Agent Access Service on this machine',
    load: async () => (await import('./commands/serve.js')).serveCommand(),
  },
  {
    name: 'grants',
    usage: '',
    description: 'list and revoke the grants people gave to clients',
    load: async () => (await import('./commands/grants.js')).grantsCommand(),
  },
  {
    name: 'charges',
    usage: '[options]',
    description: 'show charges in AKh: totals per client, and with --entries every ledger line',
    load: async () => (await import('./commands/charges.js')).chargesCommand(),
  },
  {
    name: 'dashboard',
    usage: '[options]',
    description: 'watch grants, token families, jobs, charges, requests and approvals of a running emulator, live',
    load: async (ctx) => (await import('./commands/dashboard.js')).dashboardCommand(ctx),
  },
  {
    name: 'clock',
    usage: '',
    description: "read or move the emulator's clock (`serve --clock manual`)",
    load: async (ctx) => (await import('./commands/clock.js')).clockCommand(ctx),
  },
  {
    name: 'snapshot',
    usage: '',
    description: 'save, restore and reset the whole state of a running emulator',
    load: async (ctx) => (await import('./commands/snapshot.js')).snapshotCommand(ctx),
  },
  {
    name: 'findings',
    usage: '[options]',
    description: "list what the emulator noticed about clients' habits (parallel refreshes, identity tokens, retries without a key, ...)",
    load: async (ctx) => (await import('./commands/findings.js')).findingsCommand(ctx),
  },
  {
    name: 'conformance',
    usage: '',
    description: "grade a client against the service's hard cases (README: Grading your client)",
    load: async (ctx) => (await import('./commands/conformance.js')).conformanceCommand(ctx),
  },
  {
    name: 'login',
    usage: '[options]',
    description: 'log in through the browser: discovery, registration, PKCE, consent, tokens stored for later commands',
    load: fromClient('login'),
  },
  {
    name: 'token',
    usage: '[options]',
    description: 'print a valid access token for scripts, refreshing it (with rotation) when it is close to expiry',
    load: fromClient('token'),
  },
  {
    name: 'status',
    usage: '[options]',
    description: 'who is logged in where: server, subject, scopes, audience, expiry, refresh age (exit 4 when not logged in)',
    load: fromClient('status'),
  },
  {
    name: 'logout',
    usage: '[options]',
    description: 'revoke the login at the server (RFC 7009) when it can, and forget its tokens here',
    load: fromClient('logout'),
  },
  {
    name: 'decode',
    usage: '[options] [token]',
    description: "show a token's header and claims (default: the stored access token; - reads stdin). Does not verify the signature",
    load: fromClient('decode'),
  },
  {
    name: 'ask',
    usage: '[options] <question>',
    description: 'POST /chat/ask: ask a question against the workspace and knowledge base (answers in German; charged without a key)',
    load: fromApi('ask'),
  },
  {
    name: 'research',
    usage: '[options] [question]',
    description: 'POST /research: start a research report (charged in AKh), or with --job follow one; --wait polls until it is done',
    load: fromApi('research'),
  },
  {
    name: 'train',
    usage: '[options] <file>',
    description: 'POST /training: add a document to the knowledge base; --wait follows processing_step until it is indexed',
    load: fromApi('train'),
  },
];

const usageOf = new Map(COMMANDS.map((c) => [c.name, c.usage]));

/**
 * The `agent-access` program. The command a command line names (`help NAME` included) is the real one; every
 * other command is a stand-in made from the table, which is all top-level help, the version and an unknown
 * command need. Commands load their heavy modules only when they run.
 */
export async function buildProgram(ctx: ClientContext = processContext(), argv: readonly string[] = []): Promise<Command> {
  const wanted = argv[0] === 'help' ? argv[1] : argv[0];
  const program = new Command('agent-access')
    .description('Dev kit and local emulator for the Agent Access Service')
    .version(version)
    .configureHelp({
      // A stand-in has neither options nor arguments: the table says what the real command's line looks like.
      subcommandTerm: (cmd) => {
        const usage = usageOf.get(cmd.name());
        return usage === undefined ? new Help().subcommandTerm(cmd) : `${cmd.name()}${usage ? ` ${usage}` : ''}`;
      },
    });
  for (const entry of COMMANDS)
    program.addCommand(entry.name === wanted ? await entry.load(ctx) : new Command(entry.name).description(entry.description));
  applyConventions(program, ctx);
  return program;
}

/** `agent-access grants revoke`: the words that run a command, for the hint after its usage errors. */
export function commandPath(command: Command): string {
  const words: string[] = [];
  for (let c: Command | null = command; c; c = c.parent) words.unshift(c.name());
  return words.join(' ');
}

/** The line after a usage error: where the command's own options and arguments are described. */
export const helpHint = (command: Command): string => `see \`${commandPath(command)} --help\``;

/**
 * Every command, nested ones included (commander's addCommand does not inherit these): a usage error is its one
 * line and a hint naming the command's own help (not the whole help: the error would scroll away), output goes to
 * the context.
 */
function applyConventions(command: Command, ctx: ClientContext): void {
  command
    .showHelpAfterError(helpHint(command))
    .exitOverride()
    .configureOutput({ writeOut: (s) => void ctx.stdout.write(s), writeErr: (s) => void ctx.stderr.write(s) });
  command.commands.forEach((c) => applyConventions(c, ctx));
}

/**
 * Runs one command line (without the node and script words) and resolves with its exit code. Expected failures
 * are one line on stderr, never a stack trace; usage errors exit 2, and a usage error an action finds (a value no
 * flag parser could judge alone) gets the same hint line as commander's own.
 */
export async function run(argv: string[], ctx: ClientContext = processContext()): Promise<number> {
  let running: Command | undefined;
  try {
    const program = await buildProgram(ctx, argv);
    program.hook('preAction', (_program, action) => void (running = action));
    await program.parseAsync(argv, { from: 'user' });
    return EXIT.ok;
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
    const { message, exitCode } = describeCliError(error);
    ctx.stderr.write(`agent-access: ${message}\n${exitCode === EXIT.usage && running ? `${helpHint(running)}\n` : ''}`);
    return exitCode;
  }
}
