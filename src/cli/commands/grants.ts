import { Command } from 'commander';
import { printJson, table, time } from '../output.js';

interface GrantsFlags {
  state?: string;
  json?: boolean;
  person?: string;
  client?: string;
}

/** `agent-access grants list|revoke`: the person's stored grants (spec 3.3), through a running emulator or the file. */
export function grantsCommand(): Command {
  const grants = new Command('grants').description('list and revoke the grants people gave to clients');
  grants
    .command('list')
    .description('list grants (newest first)')
    .option('--state <file>', 'state file (default .agent-access/state.json)')
    .option('--person <id>', 'only grants of this person')
    .option('--client <client_id>', 'only grants of this client')
    .option('--json', 'print JSON')
    .action(async (flags: GrantsFlags) => {
      const { openStateTarget } = await import('../state-target.js');
      const target = await openStateTarget(flags.state);
      try {
        const list = await target.listGrants({
          ...(flags.person ? { person_id: flags.person } : {}),
          ...(flags.client ? { client_id: flags.client } : {}),
        });
        if (flags.json) return printJson({ grants: list });
        if (list.length === 0) return void process.stdout.write('no grants\n');
        process.stdout.write(
          table([
            ['ID', 'CLIENT (unverified)', 'PERSON', 'SCOPES', 'STATUS', 'CREATED', 'LAST USED'],
            ...list.map((g) => [
              g.id,
              g.client_name,
              g.person_id,
              g.scopes.join(' '),
              g.status === 'active' ? 'active' : `revoked by ${g.revoked_by ?? '?'}`,
              time(g.created_at),
              time(g.last_used_at),
            ]),
          ]),
        );
      } finally {
        await target.close();
      }
    });
  grants
    .command('revoke')
    .description('revoke a grant; it applies from the next request')
    .argument('<id>', 'grant id (see grants list)')
    .option('--state <file>', 'state file (default .agent-access/state.json)')
    .option('--json', 'print JSON')
    .action(async (id: string, flags: GrantsFlags) => {
      const { openStateTarget } = await import('../state-target.js');
      const target = await openStateTarget(flags.state);
      try {
        const grant = await target.revokeGrant(id);
        if (flags.json) return printJson({ grant });
        process.stdout.write(`revoked ${grant.id} (${grant.client_name}); effective from the next request\n`);
      } finally {
        await target.close();
      }
    });
  return grants;
}
