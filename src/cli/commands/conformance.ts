import { writeFile } from 'node:fs/promises';
import { Command, InvalidArgumentError, Option } from 'commander';
import type { ClientContext } from '../../client/context.js';
import { parseDuration } from '../../core/state/clock.js';
import { formatJunit, formatTable, type ScenarioReport, type Verdict } from '../../conformance/report.js';
import { SCENARIOS, SUITES } from '../../conformance/scenarios.js';
import { CliError, EXIT } from '../errors.js';
import { jsonText } from '../output.js';

interface ClientFlags {
  scenario?: string[];
  suite?: keyof typeof SUITES;
  timeout: number;
  json?: boolean;
  junit?: string;
  keepLogs?: string;
}

/** The command under test could not be started at all. */
const NOT_STARTED = 3;

function duration(value: string): number {
  try {
    const ms = parseDuration(value);
    if (ms <= 0) throw new RangeError('the timeout must be longer than 0');
    return ms;
  } catch (e) {
    throw new InvalidArgumentError((e as Error).message);
  }
}

const COLORS: Record<Verdict, string> = { pass: '\x1b[32m', fail: '\x1b[31m', not_exercised: '\x1b[33m', skipped: '\x1b[33m' };
const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/**
 * Progress on stderr: on a terminal a spinner on the scenario that runs, replaced by its verdict; in a log one line
 * per scenario. Colours only on a terminal, and never with NO_COLOR.
 */
function progress(ctx: ClientContext) {
  const stream = ctx.stderr as NodeJS.WriteStream;
  const tty = stream.isTTY === true;
  const color = tty && !ctx.env.NO_COLOR;
  const running = new Set<string>();
  let frame = 0;
  const spinner = tty
    ? setInterval(() => running.size > 0 && stream.write(`\r\x1b[2K${FRAMES[frame++ % FRAMES.length]} ${[...running].join(', ')}`), 100)
    : undefined;
  spinner?.unref();
  return ({ scenario, report }: { scenario: string; report?: ScenarioReport }) => {
    if (!report) return void running.add(scenario);
    running.delete(scenario);
    const verdict = color ? `${COLORS[report.verdict]}${report.verdict}\x1b[0m` : report.verdict;
    const exit = report.exit_code === null ? '' : `, exit ${report.exit_code}`;
    const line = `${scenario}: ${verdict} (${(report.duration_ms / 1000).toFixed(1)} s${exit}${report.timed_out ? ', timed out' : ''})`;
    stream.write(tty ? `\r\x1b[2K${line}\n` : `${line}\n`);
  };
}

/** `agent-access conformance client -- COMMAND [ARG...]`: grade a client against the service's hard cases. */
export function conformanceCommand(ctx: ClientContext): Command {
  const conformance = new Command('conformance').description(
    "grade a client against the service's hard cases (README: Grading your client)",
  );
  conformance.addCommand(
    new Command('client')
      .description('run COMMAND ARG... BASE_URL against a fresh emulator per scenario and judge what the emulator saw')
      .usage('[options] -- COMMAND [ARG...]')
      .argument('<command...>', 'the client to grade; the base URL is appended as its last argument')
      .addOption(
        new Option('--scenario <name>', `a scenario to run, repeatable: ${SCENARIOS.map((s) => s.name).join(', ')}`).argParser(
          (value: string, previous: string[] = []) => {
            if (!SCENARIOS.some((s) => s.name === value))
              throw new InvalidArgumentError(`no scenario "${value}"; the scenarios: ${SCENARIOS.map((s) => s.name).join(', ')}`);
            return [...previous, value];
          },
        ),
      )
      .addOption(new Option('--suite <name>', 'a suite of scenarios (default: all)').choices(Object.keys(SUITES)))
      .addOption(
        new Option('--timeout <duration>', 'how long one run of the command may take, e.g. 90s, 5m')
          .argParser(duration)
          .default(2 * 60_000, '2m'),
      )
      .option('--json', 'print the report as JSON')
      .option('--junit <file>', 'also write JUnit XML, one testcase per check')
      .option('--keep-logs <dir>', "keep each scenario's request log, events, and the command's stdout and stderr")
      .action(async (command: string[], flags: ClientFlags) => {
        const { runClientConformance, CommandNotStartedError } = await import('../../conformance/runner.js');
        const [program, ...args] = command;
        let report;
        // Ctrl-C: the commands under test run in process groups of their own, which the terminal's SIGINT does not
        // reach; the run kills them, stops its emulators and removes its folders before the command exits.
        const interrupt = new AbortController();
        const stopOn = (signal: NodeJS.Signals) => () =>
          interrupt.abort(
            new CliError(
              `interrupted (${signal}): the commands under test were stopped and their folders removed`,
              EXIT.interrupted,
              'conformance_interrupted',
            ),
          );
        const offInterrupt = ctx.onInterrupt?.(stopOn('SIGINT'));
        const onTerm = stopOn('SIGTERM');
        process.once('SIGTERM', onTerm);
        try {
          report = await runClientConformance({
            command: program!,
            args,
            scenarios: flags.scenario,
            suite: flags.suite,
            timeout: flags.timeout,
            keepLogs: flags.keepLogs,
            onProgress: progress(ctx),
            signal: interrupt.signal,
          });
        } catch (e) {
          if (e instanceof CommandNotStartedError) throw new CliError(e.message, NOT_STARTED, 'command_not_started');
          throw e;
        } finally {
          offInterrupt?.();
          process.off('SIGTERM', onTerm);
        }
        ctx.stdout.write(flags.json ? jsonText(report) : formatTable(report));
        if (flags.junit) await writeFile(flags.junit, formatJunit(report));
        if ((report.summary.fail ?? 0) > 0)
          throw new CliError(`${report.summary.fail} of ${report.scenarios.length} scenarios failed`, EXIT.failure, 'conformance_failed');
      }),
  );
  conformance.addCommand(serverCommand(ctx));
  return conformance;
}

interface ServerFlags {
  baseUrl?: string;
  allowCharges?: boolean;
  allowWrites?: boolean;
  allowExtraLogins?: boolean;
  recordProfile?: string;
  headless?: boolean;
  browser: boolean;
  loginTimeout: number;
  researchTimeout: number;
  json?: boolean;
  junit?: string;
}

/** `agent-access conformance server`: the contract, rule by rule, against any server (README: Checking a server). */
function serverCommand(ctx: ClientContext): Command {
  return new Command('server')
    .description('check a server against the contract, rule by rule; by default it spends nothing and writes nothing')
    .addOption(
      new Option(
        '--base-url <url>',
        'the service ({base_url}); default $AGENT_ACCESS_BASE_URL, else an emulator running here, else the last login',
      ),
    )
    .option('--allow-charges', 'run the checks that charge (ask, research), each with an Idempotency-Key: one charge each at most')
    .option('--allow-writes', 'run the checks that add a document to the knowledge base (training)')
    .option('--allow-extra-logins', 'run the checks that need a grant of their own: one consent screen each')
    .option('--record-profile <file>', 'write what the server does where the spec says "not shown" as a profile for `serve --profile`')
    .option('--no-browser', 'print the consent URL instead of opening a browser (SSH sessions)')
    .option('--headless', 'no browser at all: only a consent policy can answer (an emulator with --consent approve, for CI)')
    .addOption(
      new Option('--login-timeout <duration>', 'how long a consent screen may wait for its answer')
        .argParser(duration)
        .default(5 * 60_000, '5m'),
    )
    .addOption(
      new Option('--research-timeout <duration>', 'how long the research job may take to succeed')
        .argParser(duration)
        .default(10 * 60_000, '10m'),
    )
    .option('--json', 'print the report as JSON')
    .option('--junit <file>', 'also write JUnit XML, one testcase per check')
    .action(async (flags: ServerFlags) => {
      const [{ Session }, { runServerConformance }] = await Promise.all([
        import('../../client/session.js'),
        import('../../contract/run.js'),
      ]);
      const session = await Session.open(ctx, flags.baseUrl);
      let run;
      try {
        ctx.stderr.write(`Checking ${session.baseUrl} (${session.why})\n`);
        run = await runServerConformance(session, {
          allowCharges: flags.allowCharges === true,
          allowWrites: flags.allowWrites === true,
          allowExtraLogins: flags.allowExtraLogins === true,
          browser: flags.headless ? 'none' : flags.browser ? 'open' : 'print',
          loginTimeoutMs: flags.loginTimeout,
          researchTimeoutMs: flags.researchTimeout,
          say: (line) => void ctx.stderr.write(`${line}\n`),
          onCheck: (c) => void ctx.stderr.write(`${c.id}: ${c.verdict === 'skipped' ? c.message : c.verdict}\n`),
        });
      } catch (e) {
        throw session.explain(e);
      } finally {
        await session.close();
      }
      const { report } = run;
      if (flags.recordProfile) {
        const { writeProfile } = await import('../../contract/profile.js');
        await writeProfile(flags.recordProfile, run, ctx.clock.now());
        ctx.stderr.write(`Wrote the profile ${flags.recordProfile}\n`);
      }
      ctx.stdout.write(flags.json ? jsonText(report) : formatTable(report));
      if (flags.junit) await writeFile(flags.junit, formatJunit(report));
      const failed = report.summary.fail ?? 0;
      if (failed > 0)
        throw new CliError(
          `${failed} of ${report.scenarios.flatMap((s) => s.checks).length} checks failed`,
          EXIT.failure,
          'conformance_failed',
        );
    });
}
