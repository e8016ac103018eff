import { relative, resolve as resolvePath } from 'node:path';
import { ADMIN_PREFIX } from './admin-api.js';
import type { AdminEndpoint } from './admin-client.js';
import { DEFAULT_STATE_FILE, adminFileFor, readAdminFile } from './admin-file.js';
import { ENV } from './env.js';
import { ClientError } from './errors.js';
import { isLoopbackHost } from './loopback.js';

/** How a command names the emulator: the admin file beside `state`, or `url` with a token. */
export interface LocateOptions {
  url?: string;
  state?: string;
  adminToken?: string;
  env: NodeJS.ProcessEnv;
  cwd: string;
}

/** Finds the emulator anew before every connection: after a restart it has another admin token (and maybe port). */
export type ResolveAdmin = () => Promise<AdminEndpoint | { unavailable: string }>;

/**
 * The admin URL for `--url` (a base URL or the admin URL itself). Only loopback: the admin API answers nothing
 * else, so sending the admin token anywhere else could only leak it.
 */
export function adminUrlOf(url: string): URL {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ClientError('usage', `--url ${url} is not a URL; give the emulator's base URL, e.g. http://127.0.0.1:4100`);
  }
  if (parsed.protocol !== 'http:' || !(isLoopbackHost(parsed.hostname) || parsed.hostname.startsWith('127.'))) {
    throw new ClientError(
      'usage',
      `--url ${url}: the admin API answers on loopback only (http://127.0.0.1:PORT); the admin token is not sent elsewhere`,
    );
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
      const token =
        options.adminToken ??
        options.env[ENV.adminToken] ??
        (info && sameLoopbackServer(target, info.admin_url) ? info.admin_token : undefined);
      if (!token)
        return { unavailable: `no admin token for ${adminUrl}: set ${ENV.adminToken} or pass --admin-token (serve --json prints it)` };
      return { adminUrl, token };
    }
    if (!info)
      return {
        unavailable: `no emulator serves ${relative(options.cwd, stateFile) || stateFile}: start \`agent-access serve\`, or pass --url`,
      };
    return { adminUrl: info.admin_url, token: options.adminToken ?? info.admin_token };
  };
}
