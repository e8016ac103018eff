import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { checkSeed, type VaryUnspecified } from '../core/emulation/variation.js';
import type { ProfileInUse } from '../server/emulator.js';
import { controls, type Endpoints, type RunningEmulator } from './controls.js';
import { consentOption, type StartEmulatorOptions } from './options.js';

const BIN = fileURLToPath(new URL('../../bin/agent-access.js', import.meta.url));

const READY_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 15_000;

/**
 * `startEmulator({ mode: 'child' })`: a separate `agent-access serve` process, started with the serve flags that say
 * what the options say, known by its JSON ready line, and stopped (SIGTERM, then SIGKILL) by `stop()`.
 */
export async function startChild(options: StartEmulatorOptions, mode: 'system' | 'manual'): Promise<RunningEmulator> {
  if (typeof options.clock === 'number')
    throw new Error('a child emulator starts its manual clock at the current time; pass clock: "manual"');
  if (options.emulator) throw new Error('the `emulator` options apply in-process only; a child takes serve flags');
  const args = [
    'serve',
    '--json',
    '--quiet',
    '--port',
    String(options.port ?? 0),
    '--auth-port',
    String(options.authPort ?? 0),
    '--clock',
    mode,
    ...(options.state ? ['--state', options.state] : ['--in-memory']),
  ];
  if (options.fixtures) args.push('--fixtures', options.fixtures);
  if (options.scenario) args.push('--scenario', options.scenario);
  if (options.rateLimit) args.push('--rate-limit', options.rateLimit);
  if (options.maxClients !== undefined) args.push('--max-clients', String(options.maxClients));
  if (options.registrationRate) args.push('--registration-rate', options.registrationRate);
  if (options.maxConnections !== undefined) args.push('--max-connections', String(options.maxConnections));
  const consent = consentOption(options);
  for (const spec of options.faults ?? []) args.push('--fault', JSON.stringify(spec));
  if (consent)
    args.push(
      '--consent',
      `${consent.clientId ? `${consent.clientId}:` : ''}${consent.policy.decision}` +
        `${consent.policy.decision === 'approve' && consent.policy.scopes ? `=${consent.policy.scopes.join(',')}` : ''}`,
    );
  if (options.varyUnspecified)
    args.push(options.varyUnspecified === true ? '--vary-unspecified' : `--vary-unspecified=${checkSeed(options.varyUnspecified.seed)}`);
  if (options.profile !== undefined) {
    if (typeof options.profile !== 'string') throw new TypeError('profile: a child emulator takes a profile file, not a profile object');
    args.push('--profile', options.profile);
  }
  const child: ChildProcess = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  // The child never outlives this process, even when a test run ends without calling stop().
  const killChild = () => child.kill('SIGKILL');
  process.once('exit', killChild);
  // The newest stderr only, for the error message of a failed start.
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr = (stderr + String(d)).slice(-16_384)));
  const exited = once(child, 'exit');
  let line: string;
  try {
    line = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`agent-access serve was not ready within ${READY_TIMEOUT_MS / 1000} s: ${stderr.trim()}`)),
        READY_TIMEOUT_MS,
      );
      createInterface({ input: child.stdout! }).once('line', (l) => {
        clearTimeout(timer);
        resolve(l);
      });
      exited.then(
        ([code]) => reject(new Error(`agent-access serve exited with ${code}: ${stderr.trim()}`)),
        (e: Error) => reject(new Error(`agent-access serve could not start: ${e.message}`)),
      );
    });
  } catch (e) {
    killChild();
    process.off('exit', killChild);
    throw e;
  }
  const ready = JSON.parse(line) as {
    base_url: string;
    auth_url: string;
    issuer: string;
    admin_url: string;
    admin_token: string;
    vary_unspecified?: VaryUnspecified;
    profile?: ProfileInUse;
  };
  const e: Endpoints = {
    baseUrl: ready.base_url,
    authUrl: ready.auth_url,
    issuer: ready.issuer,
    adminUrl: ready.admin_url,
    adminToken: ready.admin_token,
    varyUnspecified: ready.vary_unspecified ?? false,
    profile: ready.profile ?? null,
  };
  let stopping: Promise<void> | undefined;
  return controls(
    e,
    mode,
    () =>
      (stopping ??= (async () => {
        if (child.exitCode === null && child.signalCode === null) {
          child.kill('SIGTERM');
          // A clean stop flushes the state; one that hangs is cut off.
          const timer = setTimeout(killChild, STOP_TIMEOUT_MS);
          await exited.catch(() => undefined);
          clearTimeout(timer);
        }
        process.off('exit', killChild);
      })()),
  );
}
