import { Command, Option } from 'commander';
import {
  checkedFaultFlag,
  parseConsentFlag,
  parseDurationFlag,
  parsePort,
  parsePrice,
  parseCount,
  parseRateLimitFlag,
  parseRetentionFlag,
  parseSeed,
  parseSize,
} from '../flags.js';
import type { ServeFlags } from '../serve.js';

/** `agent-access serve`: its flags (read by ../flags.ts) and the run (../serve.ts, loaded only when it runs). */
export function serveCommand(): Command {
  return new Command('serve')
    .description('run the emulated Agent Access Service on this machine')
    .addOption(new Option('--port <port>', '{base_url} port (API, issuer); 0 picks a free port').argParser(parsePort).default(4100))
    .addOption(new Option('--auth-port <port>', '{auth_url} port (browser pages); 0 picks a free port').argParser(parsePort).default(4101))
    .option('--host <host>', 'interface to bind', '127.0.0.1')
    .addOption(new Option('--state <file>', 'JSON state file (default .agent-access/state.json)').conflicts('inMemory'))
    .option('--in-memory', 'keep state in memory only; nothing is written')
    .option(
      '--fixtures <dir>',
      'directory with persons.json, and optionally grants.json, workspace/<kind>.json and knowledge/*.md; default: the packaged fixtures',
    )
    .option(
      '--scenario <file>',
      'JSON scenario (clients, grants, knowledge, research jobs, charges) loaded into a new state; an existing state must come from the same scenario',
    )
    .addOption(new Option('--json', 'print one JSON line on stdout when ready; logs go to stderr').conflicts('ui'))
    .option('--ui', 'show the live dashboard in this terminal; logs go to --log-file')
    .option(
      '--log-file <file>',
      'with --ui: where the request log goes (default: next to the state file, FILE.log; in memory: .agent-access/serve.log)',
    )
    .option('--quiet', 'do not log requests')
    .addOption(
      new Option('--rate-limit <limit>', 'requests per grant on the REST allowlist, e.g. 60/min, 10/s, 1000/h')
        .argParser(parseRateLimitFlag)
        .default('60/min'),
    )
    .addOption(
      new Option('--max-clients <n>', 'registered clients at most; a registration beyond answers 503 (default 5000)').argParser(parseCount),
    )
    .addOption(
      new Option(
        '--max-connections <n>',
        'open connections at most, over both servers; at the bound the oldest idle one is closed for a new one (default 512)',
      ).argParser(parseCount),
    )
    .addOption(
      new Option(
        '--registration-rate <limit>',
        'registrations per source address on the emulator clock, e.g. 600/min (the default); beyond answers 429',
      ).argParser(parseRateLimitFlag),
    )
    .addOption(
      new Option('--ask-timeout <duration>', 'abandon POST /chat/ask after this long (30s, 1m30s; digits alone: ms)')
        .argParser(parseDurationFlag)
        .default(30_000, '30s'),
    )
    .addOption(
      new Option('--ask-latency <duration>', 'simulated thinking time of an ask (250ms, 2s; digits alone: ms)')
        .argParser(parseDurationFlag)
        .default(0),
    )
    .addOption(
      new Option(
        '--research-duration <duration>',
        'how long a research job runs on the emulator clock (default 4s; --realistic: 2m)',
      ).argParser(parseDurationFlag),
    )
    .addOption(
      new Option('--training-step <duration>', 'how long each training step takes (default 500ms; --realistic: 5s)').argParser(
        parseDurationFlag,
      ),
    )
    .addOption(
      new Option(
        '--clock <mode>',
        'system: real time; manual: time stands still until moved (agent-access clock advance 16m, or POST /_admin/clock/advance)',
      )
        .choices(['system', 'manual'])
        .default('system'),
    )
    .addOption(
      new Option(
        '--consent <policy>',
        'who answers the consent screen: page (a person, the default), approve, deny, approve=SCOPE,SCOPE (a subset); ' +
          'prefix CLIENT_ID: for one client; repeatable',
      )
        .argParser((value: string, previous: ServeFlags['consent']) => [...previous, parseConsentFlag(value)])
        .default([]),
    )
    .addOption(
      new Option(
        '--fault <spec>',
        'arm a fault from the start: KIND[:key=value,...] or JSON, e.g. rate_limit:count=3, ' +
          '"server_error:route=POST /research,status=503", latency:ms=500, drop_response:count=1, ask_timeout:match=Hufschmied, ' +
          'research_fail:count=1; repeatable (docs/emulator-control.md: Faults)',
      )
        .argParser((value: string, previous: ServeFlags['fault']) => [...previous, checkedFaultFlag(value, Date.now())])
        .default([]),
    )
    .option('--realistic', 'durations like the real service: research takes minutes, training steps seconds')
    .addOption(
      new Option(
        '--retention <kind=duration,...>',
        'how long finished records stay, on the emulator clock: jobs (7d), failed-training (7d), actions (7d), families (7d), ' +
          'codes (1d), unused-clients (1d: clients never used, from their registration); repeatable',
      )
        .argParser(parseRetentionFlag)
        .default({}, 'the defaults above'),
    )
    .addOption(
      new Option(
        '--journal-limit <size>',
        'fold the state journal into the state file once it passes both this size and the size of the state file; default 8mb',
      ).argParser(parseSize),
    )
    .addOption(new Option('--price-ask <akh>', 'AKh charged per ask without a key (default 0.1)').argParser(parsePrice))
    .addOption(new Option('--price-research <akh>', 'AKh charged per research job (default 2)').argParser(parsePrice))
    .addOption(
      new Option(
        '--vary-unspecified [seed]',
        'vary what the spec leaves open (status values, shapes, unknown fields); the same seed gives the same variants (default: a random seed, announced)',
      ).argParser(parseSeed),
    )
    .option(
      '--profile <file>',
      'answer what the spec leaves open as a real server was seen to (a profile of conformance server --record-profile); ' +
        'the rest as without it, or varied with --vary-unspecified',
    )
    .action(async (flags: ServeFlags) => {
      const { runServe } = await import('../serve.js');
      await runServe(flags);
    });
}
