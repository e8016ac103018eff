import { Command } from 'commander';
import type { ClientContext } from '../../client/context.js';
import { ADMIN_ROUTES, adminPath } from '../../protocol/admin-api.js';
import type { SnapshotInfo, SnapshotList } from '../../server/snapshots.js';
import { callAdmin, withAdminTarget, type AdminTargetFlags } from '../admin-call.js';
import { jsonText, table, time } from '../output.js';

/**
 * `agent-access snapshot save NAME | restore NAME | reset | list`: save the whole state of a running emulator and
 * bring it back exactly (state file and charge ledger byte for byte, a manual clock's time), through its admin API.
 */
export function snapshotCommand(ctx: ClientContext): Command {
  const out = (text: string) => void ctx.stdout.write(text);
  const summary = (info: SnapshotInfo) =>
    `state sha256 ${info.state_sha256.slice(0, 12)}…, ${info.charges} ${info.charges === 1 ? 'charge' : 'charges'}, ` +
    `clock ${info.clock.iso} (${info.clock.mode})`;
  const snapshot = new Command('snapshot').description('save, restore and reset the whole state of a running emulator');
  snapshot.addCommand(
    withAdminTarget(
      new Command('save')
        .description('save the state as it is now (replaces a snapshot of the same name)')
        .argument('<name>', '1–64 letters, digits, ".", "_" or "-", starting with a letter or digit'),
    ).action(async (name: string, flags: AdminTargetFlags) => {
      const info = await callAdmin<SnapshotInfo>(ctx, flags, 'POST', adminPath('saveSnapshot', { name }));
      out(
        flags.json ? jsonText(info) : `saved snapshot ${info.name}: ${summary(info)}${info.file ? `\n  ${info.file}` : ' (in memory)'}\n`,
      );
    }),
  );
  snapshot.addCommand(
    withAdminTarget(
      new Command('restore').description('bring back the state saved under NAME, exactly').argument('<name>', 'a saved snapshot'),
    ).action(async (name: string, flags: AdminTargetFlags) => {
      const info = await callAdmin<SnapshotInfo>(ctx, flags, 'POST', adminPath('restoreSnapshot', { name }));
      out(flags.json ? jsonText(info) : `restored snapshot ${info.name}: ${summary(info)}\n`);
    }),
  );
  snapshot.addCommand(
    withAdminTarget(new Command('reset').description('bring back the state as it was created (from --scenario, else the fixtures)')).action(
      async (flags: AdminTargetFlags) => {
        const info = await callAdmin<SnapshotInfo>(ctx, flags, 'POST', ADMIN_ROUTES.reset);
        out(flags.json ? jsonText(info) : `reset to the baseline: ${summary(info)}\n`);
      },
    ),
  );
  snapshot.addCommand(
    withAdminTarget(new Command('list').description('list the saved snapshots')).action(async (flags: AdminTargetFlags) => {
      const list = await callAdmin<SnapshotList>(ctx, flags, 'GET', ADMIN_ROUTES.snapshots);
      if (flags.json) return out(jsonText(list));
      const where = list.location ?? 'in memory';
      if (list.snapshots.length === 0) out(`no snapshots (${where})\n`);
      else
        out(
          table([
            ['NAME', 'SAVED', 'CLOCK', 'CHARGES', 'STATE SHA256'],
            ...list.snapshots.map((s) => [
              s.name,
              time(Date.parse(s.saved_at)),
              `${time(s.clock.now)} (${s.clock.mode})`,
              String(s.charges),
              `${s.state_sha256.slice(0, 12)}…`,
            ]),
          ]),
        );
      out(
        list.baseline
          ? `baseline (reset): saved ${time(Date.parse(list.baseline.saved_at))}; snapshots in ${where}\n`
          : `no baseline: reset is not available for this state; snapshots in ${where}\n`,
      );
    }),
  );
  return snapshot;
}
