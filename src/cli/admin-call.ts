import type { Command } from 'commander';
import type { ClientContext } from '../client/context.js';
import { CLIENT_EXIT, CliError, EXIT } from './errors.js';

/** How a command names the running emulator it acts on: the admin file beside `--state`, or `--url` with a token. */
export interface AdminTargetFlags {
  state?: string;
  url?: string;
  adminToken?: string;
  json?: boolean;
}

/** The options of every command that acts on a running emulator through its admin API. */
export const withAdminTarget = (command: Command): Command =>
  command
    .option('--state <file>', 'the emulator serving this state file (default .agent-access/state.json)')
    .option('--url <url>', "the emulator's {base_url} (loopback)")
    .option('--admin-token <token>', 'admin token with --url (default: $AGENT_ACCESS_ADMIN_TOKEN or the admin file)')
    .option('--json', 'print JSON');

/**
 * One admin call on the running emulator the flags name. An emulator that is not there is EXIT.server; its
 * refusals keep their meaning: the exit code of their problem code (src/protocol/problems.ts).
 */
export async function callAdmin<T>(
  ctx: ClientContext,
  flags: AdminTargetFlags,
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
): Promise<T> {
  const [{ locateAdmin }, { adminRequest, AdminError }] = await Promise.all([
    import('../protocol/locate.js'),
    import('../protocol/admin-client.js'),
  ]);
  const found = await locateAdmin({ ...flags, env: ctx.env, cwd: ctx.cwd })();
  if ('unavailable' in found) throw new CliError(found.unavailable, EXIT.server);
  try {
    return await adminRequest<T>(found, method, path, body);
  } catch (e) {
    if (!(e instanceof AdminError))
      throw new CliError(`the emulator does not answer at ${found.adminUrl} (${(e as Error).message})`, EXIT.server);
    throw new CliError(e.message, CLIENT_EXIT[e.kind]);
  }
}
