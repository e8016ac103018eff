import { Command } from 'commander';
import type { ClientContext } from '../../client/context.js';
import { CliError, EXIT } from '../errors.js';
import { printJson } from '../output.js';

interface ClockFlags {
  state?: string;
  url?: string;
  adminToken?: string;
  json?: boolean;
}

interface ClockView {
  mode: 'system' | 'manual';
  now: number;
  iso: string;
}

/** `agent-access clock now|advance DURATION`: read or move the clock of a running emulator (`serve --clock manual`). */
export function clockCommand(ctx: ClientContext): Command {
  const call = async (flags: ClockFlags, method: 'GET' | 'POST', path: string, body?: unknown): Promise<ClockView> => {
    const [{ locateAdmin }, { adminRequest, AdminError }] = await Promise.all([import('../../dashboard/run.js'), import('../../client/admin-api.js')]);
    const found = await locateAdmin({ ...flags, env: ctx.env, cwd: ctx.cwd })();
    if ('unavailable' in found) throw new CliError(found.unavailable, EXIT.server);
    try {
      return await adminRequest<ClockView>(found, method, path, body);
    } catch (e) {
      if (!(e instanceof AdminError)) throw new CliError(`the emulator does not answer at ${found.adminUrl} (${(e as Error).message})`, EXIT.server);
      throw new CliError(e.message, e.status === 409 ? EXIT.conflict : e.status === 400 ? EXIT.usage : EXIT.server);
    }
  };
  const print = (view: ClockView, flags: ClockFlags) => (flags.json ? printJson(view) : void ctx.stdout.write(`${view.iso} (${view.mode} clock)\n`));
  const withTarget = (command: Command) =>
    command
      .option('--state <file>', 'the emulator serving this state file (default .agent-access/state.json)')
      .option('--url <url>', "the emulator's {base_url} (loopback)")
      .option('--admin-token <token>', 'admin token with --url (default: $AGENT_ACCESS_ADMIN_TOKEN or the admin file)')
      .option('--json', 'print JSON');
  const clock = new Command('clock').description("read or move the emulator's clock (`serve --clock manual`)");
  clock.addCommand(withTarget(new Command('now').description("show the emulator's clock and whether it is manual")).action(async (flags: ClockFlags) => print(await call(flags, 'GET', '/clock'), flags)));
  clock.addCommand(
    withTarget(
      new Command('advance')
        .description('move a manual clock forward: token expiry, codes, idempotency, rate limits, research and training move together')
        .argument('<duration>', 'e.g. 16m, 24h, 900s, 500ms'),
    ).action(async (duration: string, flags: ClockFlags) => print(await call(flags, 'POST', '/clock/advance', { by: duration }), flags)),
  );
  return clock;
}
