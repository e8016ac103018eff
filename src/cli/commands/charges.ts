import { Command } from 'commander';
import { printJson, table, time } from '../output.js';

/** `agent-access charges`: what was charged, in AKh, per client (spec 1), from a running emulator or the file. */
export function chargesCommand(): Command {
  return new Command('charges')
    .description('show charges in AKh: totals per client, and with --entries every ledger line')
    .option('--state <file>', 'state file (default .agent-access/state.json)')
    .option('--entries', 'list every charge')
    .option('--json', 'print JSON (totals and entries)')
    .action(async (flags: { state?: string; entries?: boolean; json?: boolean }) => {
      const { openStateTarget } = await import('../state-target.js');
      const target = await openStateTarget(flags.state);
      try {
        const report = await target.charges();
        if (flags.json) return printJson(report);
        if (report.clients.length === 0) return void process.stdout.write('no charges\n');
        process.stdout.write(
          table([
            ['CLIENT', 'NAME (unverified)', 'CHARGES', 'TOTAL AKh'],
            ...report.clients.map((c) => [c.client_id, c.client_name, String(c.charges), c.total.toFixed(3)]),
            ['', 'all clients', String(report.entries.length), report.total.toFixed(3)],
          ]),
        );
        if (flags.entries) {
          process.stdout.write(
            '\n' +
              table([
                ['#', 'TIME', 'CLIENT', 'GRANT', 'ROUTE', 'AKh', 'IDEMPOTENCY KEY'],
                ...report.entries.map((e) => [
                  String(e.seq),
                  time(e.at),
                  e.client_id,
                  e.grant_id,
                  e.route,
                  e.amount.toFixed(3),
                  e.idempotency_key ?? '-',
                ]),
              ]),
          );
        }
      } finally {
        await target.close();
      }
    });
}
