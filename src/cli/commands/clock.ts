import { Command, InvalidArgumentError } from 'commander';
import type { ClientContext } from '../../client/context.js';
import { parseDuration } from '../../core/state/clock.js';
import { ADMIN_ROUTES } from '../../protocol/admin-api.js';
import { callAdmin, withAdminTarget, type AdminTargetFlags } from '../admin-call.js';
import { printJson } from '../output.js';

interface ClockView {
  mode: 'system' | 'manual';
  now: number;
  iso: string;
}

/** Checked here, with the parser the emulator uses, so a typo is a usage error before any emulator is looked for; sent as typed. */
function checkedDuration(value: string): string {
  try {
    parseDuration(value);
  } catch (e) {
    throw new InvalidArgumentError((e as Error).message);
  }
  return value;
}

/** `agent-access clock now|advance DURATION`: read or move the clock of a running emulator (`serve --clock manual`). */
export function clockCommand(ctx: ClientContext): Command {
  const print = (view: ClockView, flags: AdminTargetFlags) =>
    flags.json ? printJson(view) : void ctx.stdout.write(`${view.iso} (${view.mode} clock)\n`);
  const clock = new Command('clock').description("read or move the emulator's clock (`serve --clock manual`)");
  clock.addCommand(
    withAdminTarget(new Command('now').description("show the emulator's clock and whether it is manual")).action(
      async (flags: AdminTargetFlags) => print(await callAdmin<ClockView>(ctx, flags, 'GET', ADMIN_ROUTES.clock), flags),
    ),
  );
  clock.addCommand(
    withAdminTarget(
      new Command('advance')
        .description('move a manual clock forward: token expiry, codes, idempotency, rate limits, research and training move together')
        .argument('<duration>', 'e.g. 16m, 24h, 23h59m, 1h30m, 90s, 2d, 500ms; digits alone: milliseconds', checkedDuration),
    ).action(async (duration: string, flags: AdminTargetFlags) =>
      print(await callAdmin<ClockView>(ctx, flags, 'POST', ADMIN_ROUTES.advanceClock, { by: duration }), flags),
    ),
  );
  return clock;
}
