import { Command } from 'commander';
import type { ClientContext } from '../../client/context.js';
import { CliError, EXIT } from '../errors.js';

interface DashboardFlags {
  url?: string;
  state?: string;
  adminToken?: string;
}

/** The dashboard needs a keyboard and a screen; piped or redirected, it says so instead of drawing into a file. */
export function requireTerminal(what: string): void {
  if (!process.stdin.isTTY || !process.stdout.isTTY)
    throw new CliError(`${what} needs an interactive terminal (stdin and stdout must be a TTY)`, EXIT.usage);
}

/** `agent-access dashboard`: watch a running emulator live in this terminal. */
export function dashboardCommand(ctx: ClientContext): Command {
  return new Command('dashboard')
    .description('watch grants, token families, jobs, charges, requests and approvals of a running emulator, live')
    .option('--url <url>', "the emulator's {base_url} (default: the one serving .agent-access/state.json here)")
    .option('--state <file>', 'find the emulator through the admin file next to this state file (default .agent-access/state.json)')
    .option(
      '--admin-token <token>',
      'admin token, with --url (better: $AGENT_ACCESS_ADMIN_TOKEN, which other users cannot see in ps; default: the admin file)',
    )
    .action(async (flags: DashboardFlags) => {
      const [{ locateAdmin }, { runDashboard }] = await Promise.all([import('../../protocol/locate.js'), import('../../dashboard/run.js')]);
      const resolve = locateAdmin({ ...flags, env: ctx.env, cwd: ctx.cwd });
      requireTerminal('the dashboard');
      await runDashboard(resolve, process, ctx.env);
    });
}
