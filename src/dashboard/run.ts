import { relative, resolve as resolvePath } from 'node:path';
import { DEFAULT_STATE_FILE, adminFileFor, readAdminFile } from '../server/admin-file.js';
import { ENV } from '../client/context.js';
import { CliError, EXIT } from '../cli/errors.js';
import { ADMIN_PREFIX } from '../server/admin-routes.js';
import type { DashboardActions, DashboardProps } from './app.js';
import { adminRequest, type AdminEndpoint } from '../client/admin-api.js';
import { followAdminStream, type ResolveAdmin } from './stream.js';


export interface LocateOptions {
  url?: string;
  state?: string;
  adminToken?: string;
  env: NodeJS.ProcessEnv;
  cwd: string;
}

const LOOPBACK_NAMES = new Set(['127.0.0.1', 'localhost', '[::1]']);

/**
 * The admin URL for `--url` (a base URL or the admin URL itself). Only loopback: the admin API answers nothing
 * else, so sending the admin token anywhere else could only leak it.
 */
export function adminUrlOf(url: string): URL {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new CliError(`--url ${url} is not a URL; give the emulator's base URL, e.g. http://127.0.0.1:4100`, EXIT.usage);
  }
  if (parsed.protocol !== 'http:' || !(LOOPBACK_NAMES.has(parsed.hostname) || parsed.hostname.startsWith('127.'))) {
    throw new CliError(`--url ${url}: the admin API answers on loopback only (http://127.0.0.1:PORT); the admin token is not sent elsewhere`, EXIT.usage);
  }
  const path = parsed.pathname.replace(/\/+$/, '');
  parsed.pathname = path.endsWith(ADMIN_PREFIX) ? path : `${path}${ADMIN_PREFIX}`;
  return parsed;
}

/** Two loopback admin URLs name the same server when their ports match (127.0.0.1, localhost and [::1] alike). */
const sameLoopbackServer = (a: URL, b: string): boolean => {
  try {
    return new URL(b).port === a.port;
  } catch {
    return false;
  }
};

/**
 * Finds the emulator each time it is asked (a restarted emulator has a new admin token): the admin file that
 * `serve` writes next to its state file, or `--url` with `--admin-token`, `$AGENT_ACCESS_ADMIN_TOKEN` or the
 * admin file of the same server.
 */
export function locateAdmin(options: LocateOptions): ResolveAdmin {
  const stateFile = resolvePath(options.cwd, options.state ?? DEFAULT_STATE_FILE);
  const file = adminFileFor(stateFile);
  const target = options.url ? adminUrlOf(options.url) : null;
  return async () => {
    const info = await readAdminFile(file);
    if (target) {
      const adminUrl = target.href.replace(/\/$/, '');
      // The admin file is read anew each time: a restarted emulator on the same port has a new token.
      const token = options.adminToken ?? options.env[ENV.adminToken] ?? (info && sameLoopbackServer(target, info.admin_url) ? info.admin_token : undefined);
      if (!token) return { unavailable: `no admin token for ${adminUrl}: set ${ENV.adminToken} or pass --admin-token (serve --json prints it)` };
      return { adminUrl, token };
    }
    if (!info) return { unavailable: `no emulator serves ${relative(options.cwd, stateFile) || stateFile}: start \`agent-access serve\`, or pass --url` };
    return { adminUrl: info.admin_url, token: options.adminToken ?? info.admin_token };
  };
}

/** The dashboard's two ends on a running emulator: the stream it follows, and the admin calls its keys make. */
export function connectDashboard(resolve: ResolveAdmin): { subscribe: DashboardProps['subscribe']; actions: DashboardActions } {
  let current: AdminEndpoint | null = null;
  const tracked: ResolveAdmin = async () => {
    const found = await resolve();
    current = 'unavailable' in found ? null : found;
    return found;
  };
  const act = async (path: string, body?: unknown) => {
    if (!current) throw new Error('not connected to an emulator');
    await adminRequest(current, 'POST', path, body);
  };
  return {
    subscribe: (push) => {
      const controller = new AbortController();
      void followAdminStream({ resolve: tracked, onMessage: push, signal: controller.signal });
      return () => controller.abort();
    },
    actions: {
      revokeGrant: (id) => act(`/grants/${encodeURIComponent(id)}/revoke`),
      decideAction: (id, decision) => act(`/actions/${encodeURIComponent(id)}/decide`, { decision }),
    },
  };
}

/** NO_COLOR (https://no-color.org): present and not empty turns colours off. */
export const colorsAllowed = (env: NodeJS.ProcessEnv): boolean => !env[ENV.noColor];

export interface TerminalStreams {
  stdin: NodeJS.ReadStream;
  stdout: NodeJS.WriteStream;
  stderr: NodeJS.WriteStream;
}

/**
 * Runs the dashboard full-screen in this terminal until the person quits (q or Ctrl+C) or `stop` is called.
 * It follows the admin stream of whatever `resolve` finds, reconnecting as needed.
 */
export async function runDashboard(resolve: ResolveAdmin, io: TerminalStreams, env: NodeJS.ProcessEnv, stop?: AbortSignal): Promise<void> {
  // With CI set, Ink draws only its last frame and chalk drops colours; this is an interactive terminal (checked
  // by the caller), whatever the environment says. Removed before Ink and chalk load, as they read it once.
  delete process.env.CI;
  delete process.env.CONTINUOUS_INTEGRATION;
  const [{ render }, { createElement }, { Dashboard }] = await Promise.all([import('ink'), import('react'), import('./app.js')]);
  const { subscribe, actions } = connectDashboard(resolve);
  // The alternate screen: the dashboard takes the whole terminal and gives it back as it was. Each frame is one
  // write of the whole (23-line) frame, wrapped in synchronized-update marks by Ink, at most 30 per second: no
  // flicker. (Ink's incremental mode drew frames one line off here; the plain mode does not.)
  io.stdout.write('\u001B[?1049h');
  // Whatever ends the process, the person gets their screen back.
  const leaveScreen = () => io.stdout.write('\u001B[?1049l');
  process.once('exit', leaveScreen);
  const instance = render(
    createElement(Dashboard, {
      subscribe,
      actions,
      colors: colorsAllowed(env),
    }),
    { stdin: io.stdin, stdout: io.stdout, stderr: io.stderr, exitOnCtrlC: true, patchConsole: false },
  );
  const onStop = () => instance.unmount();
  stop?.addEventListener('abort', onStop, { once: true });
  if (stop?.aborted) onStop();
  try {
    await instance.waitUntilExit();
  } finally {
    stop?.removeEventListener('abort', onStop);
    process.off('exit', leaveScreen);
    leaveScreen();
  }
}
