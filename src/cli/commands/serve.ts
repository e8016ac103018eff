import { Command, InvalidArgumentError, Option } from 'commander';

export interface ServeFlags {
  port: number;
  authPort: number;
  host: string;
  state?: string;
  inMemory?: boolean;
  fixtures?: string;
  json?: boolean;
  quiet?: boolean;
}

export const parsePort = (value: string): number => {
  const n = Number(value);
  if (!/^\d+$/.test(value) || n > 65535) throw new InvalidArgumentError('a port is a whole number from 0 to 65535 (0 picks a free port)');
  return n;
};

export function serveCommand(): Command {
  return new Command('serve')
    .description('run the emulated Agent Access Service on this machine')
    .addOption(new Option('--port <port>', '{base_url} port (API, issuer); 0 picks a free port').argParser(parsePort).default(4100))
    .addOption(new Option('--auth-port <port>', '{auth_url} port (browser pages); 0 picks a free port').argParser(parsePort).default(4101))
    .option('--host <host>', 'interface to bind', '127.0.0.1')
    .addOption(new Option('--state <file>', 'JSON state file').default(undefined, '.agent-access/state.json').conflicts('inMemory'))
    .option('--in-memory', 'keep state in memory only; nothing is written')
    .option('--fixtures <dir>', 'directory with persons.json (and grants.json); default: the packaged fixtures')
    .option('--json', 'print one JSON line on stdout when ready; logs go to stderr')
    .option('--quiet', 'do not log requests')
    .action(async (flags: ServeFlags) => {
      const { runServe } = await import('../serve.js');
      await runServe(flags);
    });
}
