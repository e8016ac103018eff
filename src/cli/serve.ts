import { REALISTIC_TIMINGS } from '../core/jobs.js';
import { Emulator } from '../server/emulator.js';
import type { ServeFlags } from './commands/serve.js';
import { EXIT, failWith } from './errors.js';

/** `agent-access serve`: start, announce, log requests to stderr, stop cleanly on SIGINT/SIGTERM. */
export async function runServe(flags: ServeFlags): Promise<void> {
  let emulator: Emulator | undefined;
  try {
    emulator = await Emulator.start({
      port: flags.port,
      authPort: flags.authPort,
      host: flags.host,
      state: flags.state,
      inMemory: flags.inMemory,
      fixtures: flags.fixtures,
      rateLimit: flags.rateLimit,
      askTimeoutMs: flags.askTimeout,
      askLatencyMs: flags.askLatency,
      timings: {
        ...(flags.realistic ? REALISTIC_TIMINGS : {}),
        ...(flags.researchDuration !== undefined ? { researchRunMs: flags.researchDuration } : {}),
        ...(flags.trainingStep !== undefined ? { trainingStepMs: flags.trainingStep } : {}),
      },
      prices: { ...(flags.priceAsk !== undefined ? { ask: flags.priceAsk } : {}), ...(flags.priceResearch !== undefined ? { research: flags.priceResearch } : {}) },
      onError: (error, context) => {
        process.stderr.write(`agent-access: ${context === 'request' ? 'request failed' : context}: ${error.stack ?? error.message}\n`);
        if (context === 'lock') void emulator?.stop().finally(() => process.exit(EXIT.state));
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
    pid: process.pid,
  };
  if (flags.json) {
    process.stdout.write(JSON.stringify(ready) + '\n');
  } else {
    process.stdout.write(
      [
        'agent-access emulator ready',
        `  base_url  ${ready.base_url}   (issuer, API, ${ready.base_url}/mcp)`,
        `  auth_url  ${ready.auth_url}   (authorize, consent, ${ready.auth_url}/settings)`,
        `  metadata  ${ready.base_url}/.well-known/oauth-authorization-server`,
        `  state     ${ready.state ?? 'in memory'}`,
        '  Ctrl+C stops it.',
        '',
      ].join('\n'),
    );
  }
  if (!flags.quiet) {
    emulator.core.events.subscribe((event) => {
      if (event.name === 'request.served') {
        const d = event.data;
        process.stderr.write(`${new Date(event.at).toISOString()} ${d.server} ${d.method} ${d.path} ${d.status} ${d.ms}ms${d.client_id ? ` ${d.client_id}` : ''}\n`);
      } else if (event.name === 'family.invalidated' || event.name === 'grant.revoked' || event.name === 'code.replayed') {
        process.stderr.write(`${new Date(event.at).toISOString()} ${event.name} ${JSON.stringify(event.data)}\n`);
      }
    });
  }
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
