import { homedir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { ENV } from '../protocol/env.js';

/** Milliseconds since the epoch; the emulator's clocks fit, so a test can share one virtual clock with it. */
export interface Clock {
  now(): number;
}

const systemClock: Clock = { now: () => Date.now() };

/** Where a command writes: a stream with an optional TTY flag (progress lines animate only on a TTY). */
export interface Output {
  write(text: string): unknown;
  isTTY?: boolean;
}

/**
 * Everything the client side takes from its surroundings, injected so the same commands run from the
 * binary and in-process from tests (one virtual clock shared with an emulator, a scripted browser).
 */
export interface ClientContext {
  clock: Clock;
  env: NodeJS.ProcessEnv;
  cwd: string;
  stdout: Output;
  stderr: Output;
  /**
   * Shows the person a URL in their browser: resolves once it was handed over, rejects saying why none could be
   * opened (may stay pending while a browser started directly runs).
   */
  openUrl(url: string): Promise<void>;
  /** Subscribes to Ctrl-C while a long wait (login, --wait) runs, so it can stop cleanly; returns the unsubscribe. */
  onInterrupt?(handler: () => void): () => void;
}

/** The context of a real run: system clock, process streams, the person's browser. */
export function processContext(): ClientContext {
  return {
    clock: systemClock,
    env: process.env,
    cwd: process.cwd(),
    stdout: process.stdout,
    stderr: process.stderr,
    openUrl: (url) => openInBrowser(url, process.env),
    onInterrupt(handler) {
      process.once('SIGINT', handler);
      return () => process.off('SIGINT', handler);
    },
  };
}

/**
 * `$BROWSER` wins when set (a command that gets the URL as its last argument, as with git and gh),
 * otherwise the platform's opener through `open`. Resolves when the opener exits 0; rejects, saying what happened,
 * when none can be started, when it exits otherwise, or at once when there is no display to open one on. A browser
 * started directly (`BROWSER=firefox`) runs on: the promise stays pending and keeps nothing alive.
 */
export async function openInBrowser(url: string, env: NodeJS.ProcessEnv): Promise<void> {
  const browser = env[ENV.browser]?.trim();
  let child: import('node:child_process').ChildProcess;
  let what: string;
  if (browser) {
    const { spawn } = await import('node:child_process');
    const [command, ...args] = browser.split(/\s+/);
    what = `$BROWSER "${browser}"`;
    child = spawn(command!, [...args, url], { stdio: 'ignore', detached: true });
  } else {
    if (process.platform === 'linux' && !env.DISPLAY && !env.WAYLAND_DISPLAY && !(await isWsl()))
      throw new Error('no display to open a browser on (neither DISPLAY nor WAYLAND_DISPLAY is set, and $BROWSER is not)');
    const { default: open } = await import('open');
    what = 'the system opener';
    child = await open(url);
  }
  child.unref();
  await new Promise<void>((resolve, reject) => {
    child.once('error', (e: NodeJS.ErrnoException) =>
      reject(new Error(e.code === 'ENOENT' ? `${what} was not found` : `${what} could not be started (${e.code ?? e.message})`)),
    );
    child.once('exit', (code, signal) => (code === 0 ? resolve() : reject(new Error(`${what} exited ${code ?? signal}`))));
  });
}

/** Windows' Linux subsystem opens the Windows browser without a display of its own (the `open` package knows how). */
async function isWsl(): Promise<boolean> {
  const { readFile } = await import('node:fs/promises');
  return /microsoft/i.test(await readFile('/proc/sys/kernel/osrelease', 'utf8').catch(() => ''));
}

/** `$AGENT_ACCESS_CONFIG_DIR`, else `$XDG_CONFIG_HOME/agent-access`, else `~/.config/agent-access`. */
export function configDir(env: NodeJS.ProcessEnv): string {
  const own = env[ENV.configDir]?.trim();
  if (own) return own;
  const xdg = env.XDG_CONFIG_HOME?.trim();
  return join(xdg && isAbsolute(xdg) ? xdg : join(homedir(), '.config'), 'agent-access');
}

/** True when output may carry ANSI escapes: a TTY, and `NO_COLOR` unset or empty (no-color.org). */
export const useAnsi = (ctx: ClientContext, out: Output = ctx.stderr): boolean => out.isTTY === true && !ctx.env[ENV.noColor];
