/**
 * src/cli/program.ts answers top-level help from a table of the commands, so that help and the version load no
 * command module. The table must say what the real commands say: same names in the same order, the same line
 * in help, the same description. A command added to a module but not to the table fails here.
 */
import { Command, Help } from 'commander';
import { describe, expect, it } from 'vitest';
import { processContext } from '../../src/client/context.js';
import { apiCommands } from '../../src/cli/commands/api.js';
import { chargesCommand } from '../../src/cli/commands/charges.js';
import { clientCommands } from '../../src/cli/commands/client.js';
import { clockCommand } from '../../src/cli/commands/clock.js';
import { conformanceCommand } from '../../src/cli/commands/conformance.js';
import { dashboardCommand } from '../../src/cli/commands/dashboard.js';
import { findingsCommand } from '../../src/cli/commands/findings.js';
import { grantsCommand } from '../../src/cli/commands/grants.js';
import { serveCommand } from '../../src/cli/commands/serve.js';
import { snapshotCommand } from '../../src/cli/commands/snapshot.js';
import { COMMANDS, buildProgram } from '../../src/cli/program.js';

const ctx = processContext();

/** Every command the modules define, in help's order, built without the table. */
const realCommands = (): Command[] => [
  serveCommand(),
  grantsCommand(),
  chargesCommand(),
  dashboardCommand(ctx),
  clockCommand(ctx),
  snapshotCommand(ctx),
  findingsCommand(ctx),
  conformanceCommand(ctx),
  ...clientCommands(ctx),
  ...apiCommands(ctx),
];

describe('the command table of the top-level help', () => {
  it('names every real command in order, with its help line and its description', () => {
    const real = realCommands();
    const help = new Help();
    expect(COMMANDS.map((c) => c.name)).toEqual(real.map((c) => c.name()));
    for (const [entry, command] of COMMANDS.map((e, i) => [e, real[i]!] as const)) {
      expect(`${entry.name}${entry.usage ? ` ${entry.usage}` : ''}`, entry.name).toBe(help.subcommandTerm(command));
      expect(entry.description, entry.name).toBe(help.subcommandDescription(command));
    }
  });

  it('loads the real command for each entry', async () => {
    for (const entry of COMMANDS) expect((await entry.load(ctx)).name()).toBe(entry.name);
  });

  it('top-level help built from the table is the help of the real commands', async () => {
    const program = await buildProgram(ctx, ['--help']);
    const reference = new Command(program.name()).description(program.description()).version(program.version()!);
    for (const command of realCommands()) reference.addCommand(command);
    expect(program.helpInformation()).toBe(reference.helpInformation());
    expect(program.helpInformation()).toContain('help [command]');
  });

  it('a named command is the real one, also as `help NAME`', async () => {
    for (const argv of [
      ['ask', '--help'],
      ['help', 'ask'],
    ]) {
      const ask = (await buildProgram(ctx, argv)).commands.find((c) => c.name() === 'ask')!;
      expect(ask.registeredArguments.map((a) => a.name())).toEqual(['question']);
    }
  });
});
