import { randomInt } from 'node:crypto';
import { open } from 'node:fs/promises';
import Module from 'node:module';
import { dirname, resolve } from 'node:path';
import { ManualClock } from '../core/state/clock.js';
import { REALISTIC_TIMINGS } from '../core/resources/jobs.js';
import { DEFAULT_STATE_FILE } from '../protocol/admin-file.js';
import { Emulator, type ProfileInUse } from '../server/emulator.js';
import { requireTerminal } from './commands/dashboard.js';
import { CliError, EXIT, failWith } from './errors.js';
import { isLoopbackBind } from '../server/host-guard.js';
import type { ConsentPolicy } from '../core/emulation/consent-policy.js';
import { makeDirDurably } from '../store/durable-write.js';
import type { FaultSpec } from '../core/emulation/fault-spec.js';
import type { Retention } from '../core/oauth/retention.js';

/** `agent-access serve`'s flags as commander hands them over (parsed by src/cli/flags.ts). */
export interface ServeFlags {
  port: number;
  authPort: number;
  host: string;
  state?: string;
  inMemory?: boolean;
  fixtures?: string;
  scenario?: string;
  json?: boolean;
  quiet?: boolean;
  rateLimit: string;
  maxClients?: number;
  maxConnections?: number;
  registrationRate?: string;
  askTimeout: number;
  askLatency: number;
  priceAsk?: number;
  priceResearch?: number;
  researchDuration?: number;
  trainingStep?: number;
  realistic?: boolean;
  ui?: boolean;
  clock: 'system' | 'manual';
  logFile?: string;
  consent: Array<{ clientId: string | null; policy: ConsentPolicy }>;
  fault: FaultSpec[];
  /** `true` without a seed (one is picked at random and announced). */
  varyUnspecified?: number | true;
  /** A variant profile file (`conformance server --record-profile`): answer its dimensions the observed way. */
  profile?: string;
  retention: Partial<Retention>;
  journalLimit?: number;
}

interface Log {
  write(text: string): void;
  file: string | null;
  /** Waits until everything written is in the file. */
  close(): Promise<void>;
}

/** With --ui the terminal belongs to the dashboard: the log goes to a file beside the state (0600). */
async function openLog(flags: ServeFlags): Promise<Log> {
  if (!flags.ui) return { write: (text) => void process.stderr.write(text), file: null, close: async () => undefined };
  const file = resolve(
    flags.logFile ??
      (flags.inMemory ? '.agent-access/serve.log' : `${resolve(flags.state ?? DEFAULT_STATE_FILE).replace(/\.json$/i, '')}.log`),
  );
  let handle;
  try {
    // Often the state's folder, which the lock then finds made: made as the lock makes it (0700, synced).
    await makeDirDurably(dirname(file), { gitignore: flags.logFile === undefined });
    handle = await open(file, 'a', 0o600);
    // An existing log keeps its mode on open: it holds client ids and paths, so it is made private too.
    await handle.chmod(0o600);
  } catch (e) {
    throw new CliError(`cannot write the log file ${file} (${(e as Error).message}); pass --log-file`, EXIT.state);
  }
  const stream = handle.createWriteStream();
  let failed = false;
  stream.on('error', () => (failed = true));
  return {
    write: (text) => void (failed || stream.write(text)),
    file,
    close: () => new Promise<void>((done) => stream.end(() => done())),
  };
}

/** `agent-access serve`: start, announce, log requests to stderr, stop cleanly on SIGINT/SIGTERM. */
export async function runServe(flags: ServeFlags): Promise<void> {
  let emulator: Emulator | undefined;
  let log: Log;
  const uiStop = new AbortController();
  try {
    if (flags.ui) {
      // The dashboard reaches the admin API over loopback; a bind to one other address would leave it outside.
      if (!isLoopbackBind(flags.host) && flags.host !== '0.0.0.0' && flags.host !== '::')
        throw new CliError(
          `serve --ui needs a loopback or wildcard --host (the dashboard talks to the admin API over loopback), not ${flags.host}`,
          EXIT.usage,
        );
      requireTerminal('serve --ui');
    }
    log = await openLog(flags);
    emulator = await Emulator.start({
      port: flags.port,
      authPort: flags.authPort,
      host: flags.host,
      state: flags.state,
      inMemory: flags.inMemory,
      fixtures: flags.fixtures,
      scenario: flags.scenario,
      ...(flags.clock === 'manual' ? { clock: new ManualClock() } : {}),
      rateLimit: flags.rateLimit,
      maxClients: flags.maxClients,
      maxConnections: flags.maxConnections,
      registrationRate: flags.registrationRate,
      consent: flags.consent,
      faults: flags.fault,
      askTimeoutMs: flags.askTimeout,
      retention: flags.retention,
      journalLimit: flags.journalLimit,
      askLatencyMs: flags.askLatency,
      timings: {
        ...(flags.realistic ? REALISTIC_TIMINGS : {}),
        ...(flags.researchDuration !== undefined ? { researchRunMs: flags.researchDuration } : {}),
        ...(flags.trainingStep !== undefined ? { trainingStepMs: flags.trainingStep } : {}),
      },
      prices: {
        ...(flags.priceAsk !== undefined ? { ask: flags.priceAsk } : {}),
        ...(flags.priceResearch !== undefined ? { research: flags.priceResearch } : {}),
      },
      // Without a seed, a short random one: announced, so a run can be repeated with it.
      ...(flags.varyUnspecified !== undefined
        ? { varyUnspecified: { seed: flags.varyUnspecified === true ? randomInt(1_000_000) : flags.varyUnspecified } }
        : {}),
      ...(flags.profile !== undefined ? { profile: flags.profile } : {}),
      // One line each, on stderr (never stdout, which carries the ready line); with --ui in the log as well.
      onNotice: (line) => {
        process.stderr.write(`agent-access: ${line}\n`);
        if (log.file) log.write(`${new Date().toISOString()} ${line}\n`);
      },
      onError: (error, context) => {
        // Losing the lock or the files is expected in its way: its message says it all, without a stack.
        const text = context === 'lock' || context === 'state' ? error.message : (error.stack ?? error.message);
        log.write(`agent-access: ${context === 'request' ? 'request failed' : context}: ${text}\n`);
        if (context === 'lock' || context === 'state') {
          process.exitCode = EXIT.state;
          // With --ui the dashboard ends first (it gives the terminal back), then the emulator stops.
          if (flags.ui) uiStop.abort();
          else void emulator?.stop().finally(() => process.exit(EXIT.state));
        }
      },
    });
  } catch (e) {
    failWith(e);
  }
  const ready = {
    base_url: emulator.baseUrl,
    auth_url: emulator.authUrl,
    issuer: emulator.issuer,
    state: emulator.statePath,
    admin_url: emulator.adminUrl,
    admin_token: emulator.adminToken,
    clock: flags.clock,
    pid: process.pid,
    ...(emulator.varyUnspecified ? { vary_unspecified: emulator.varyUnspecified } : {}),
    ...(emulator.profile ? { profile: emulator.profile } : {}),
  };
  if (flags.json) {
    process.stdout.write(JSON.stringify(ready) + '\n');
  } else if (!flags.ui) {
    process.stdout.write(
      [
        'agent-access emulator ready',
        `  base_url  ${ready.base_url}   (issuer, API, ${ready.base_url}/mcp)`,
        `  auth_url  ${ready.auth_url}   (authorize, consent, ${ready.auth_url}/settings)`,
        `  metadata  ${ready.base_url}/.well-known/oauth-authorization-server`,
        `  state     ${ready.state ?? 'in memory'}`,
        ...(emulator.varyUnspecified
          ? [
              `  varying   what the spec leaves open, seed ${emulator.varyUnspecified.seed} ` +
                `(--vary-unspecified=${emulator.varyUnspecified.seed} repeats it; see the Agent-Access-Variant header)`,
            ]
          : []),
        ...(emulator.profile ? profileLines(emulator.profile) : []),
        '  Ctrl+C stops it.',
        '',
      ].join('\n'),
    );
  }
  // Node writes its compile cache at exit, which a server stopped by kill -9 never reaches: written once started, the
  // next start compiles none of what this one did (Node >= 22.10; bin/agent-access.js enables it). Once after the ready
  // line, for all the start compiled, and again for what loads after it: those loads wait for quiet moments, which a
  // busy machine may not give for a long time. A second flush writes only what the first did not. Node 20's typings
  // lack it.
  const { flushCompileCache } = Module as { flushCompileCache?: () => void };
  setImmediate(() => flushCompileCache?.());
  void emulator.loaded().then(
    () => flushCompileCache?.(),
    () => undefined,
  );
  if (!flags.quiet) {
    emulator.core.events.subscribe((event) => {
      if (event.name === 'request.served') {
        const d = event.data;
        log.write(
          `${new Date(event.at).toISOString()} ${d.server} ${d.method} ${d.path} ${d.status} ${d.ms}ms` +
            `${d.client_id ? ` ${d.client_id}` : ''}${d.faults ? ` FAULT ${d.faults.join(', ')}` : ''}${d.variant ? ` variant: ${d.variant}` : ''}\n`,
        );
      } else if (event.name === 'finding.recorded') {
        // Once per finding; `agent-access findings` has the count, message and hint.
        const f = event.data;
        if (f.count === 1) log.write(`${new Date(event.at).toISOString()} FINDING ${f.code} ${f.client_id} ${f.severity}: ${f.message}\n`);
      } else if (
        event.name === 'family.invalidated' ||
        event.name === 'grant.revoked' ||
        event.name === 'code.replayed' ||
        event.name.startsWith('fault.')
      ) {
        log.write(`${new Date(event.at).toISOString()} ${event.name} ${JSON.stringify(event.data)}\n`);
      }
    });
  }
  if (flags.ui) return runWithDashboard(emulator, log, uiStop);
  let signals = 0;
  const shutdown = (signal: string) => {
    if (++signals > 1) {
      process.stderr.write(`agent-access: ${signal} again, exiting without waiting\n`);
      process.exit(1);
    }
    if (!flags.quiet) process.stderr.write(`agent-access: ${signal}, finishing in-flight requests and flushing state\n`);
    emulator.stop().then(
      () => process.exit(process.exitCode ?? 0),
      (e) => failWith(e),
    );
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
}

/** `serve --ui`: the dashboard in this terminal until q or Ctrl+C (or a signal), then a clean stop. */
async function runWithDashboard(emulator: Emulator, log: Log, stop: AbortController): Promise<void> {
  const { runDashboard } = await import('../dashboard/run.js');
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.once(signal, () => stop.abort());
  log.write(`${new Date().toISOString()} serving ${emulator.baseUrl} and ${emulator.authUrl} with the dashboard\n`);
  try {
    await runDashboard(async () => ({ adminUrl: emulator.adminUrl, token: emulator.adminToken }), process, process.env, stop.signal);
  } finally {
    await emulator.stop().catch((e: Error) => log.write(`agent-access: stop: ${e.message}\n`));
    await log.close();
  }
  process.stdout.write(`agent-access: stopped ${emulator.baseUrl}; the log is in ${log.file}\n`);
  process.exit(process.exitCode ?? 0);
}

/** The banner's lines for `--profile`: what is pinned, and what is not because the emulator cannot mimic it yet. */
function profileLines(profile: ProfileInUse): string[] {
  return [
    `  profile   ${profile.file ?? profile.name} (recorded from ${profile.server}): ` +
      `${profile.pinned.length} dimension${profile.pinned.length === 1 ? '' : 's'} answered as observed; see the Agent-Access-Variant header`,
    ...(profile.not_pinned.length
      ? [`            not pinned (a shape the emulator cannot mimic yet): ${profile.not_pinned.join(', ')}`]
      : []),
  ];
}
