import { adminPath } from '../protocol/admin-api.js';
import { adminRequest, type AdminEndpoint } from '../protocol/admin-client.js';
import { ENV } from '../protocol/env.js';
import type { ResolveAdmin } from '../protocol/locate.js';
import type { DashboardActions, DashboardProps } from './app.js';
import { followAdminStream } from './stream.js';

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
      revokeGrant: (id) => act(adminPath('revokeGrant', { id })),
      decideAction: (id, decision) => act(adminPath('decideAction', { id }), { decision }),
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
