import { Command, Option } from 'commander';
import type { ClientContext } from '../../client/context.js';
import { ADMIN_ROUTES, allPages } from '../../protocol/admin-api.js';
import { SEVERITIES, findingsAtOrAbove, formatFinding, type FindingSeverity, type FindingsList } from '../../protocol/findings.js';
import { callAdmin, withAdminTarget, type AdminTargetFlags } from '../admin-call.js';
import { CliError, EXIT } from '../errors.js';
import { printJson } from '../output.js';

/**
 * `agent-access findings`: what the running emulator noticed about its clients' traffic, with a hint for each; with
 * `--fail-on`, a CI gate (exit 10 when any finding is at or above the severity).
 */
export function findingsCommand(ctx: ClientContext): Command {
  return withAdminTarget(
    new Command('findings')
      .description("list what the emulator noticed about clients' habits (parallel refreshes, identity tokens, retries without a key, ...)")
      .addOption(
        new Option('--fail-on <severity>', `exit ${EXIT.findings} when a finding is at or above this severity`).choices([...SEVERITIES]),
      ),
  ).action(async (flags: AdminTargetFlags & { failOn?: FindingSeverity }) => {
    const findings = await allPages('findings', ADMIN_ROUTES.findings, (path) => callAdmin<FindingsList>(ctx, flags, 'GET', path));
    if (flags.json) printJson({ findings });
    else ctx.stdout.write(findings.length === 0 ? 'no findings\n' : `${findings.map(formatFinding).join('\n\n')}\n`);
    const failing = flags.failOn ? findingsAtOrAbove(findings, flags.failOn) : [];
    if (failing.length > 0)
      throw new CliError(
        `${failing.length} finding${failing.length === 1 ? '' : 's'} at or above ${flags.failOn}`,
        EXIT.findings,
        'findings_reported',
      );
  });
}
