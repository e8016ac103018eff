import { resolve } from 'node:path';
import { DEFAULT_STATE_FILE, adminFileFor, isAlive, readAdminFile } from '../protocol/admin-file.js';
import { ENV } from '../protocol/env.js';
import { ClientError } from '../protocol/errors.js';
import { isLoopbackHost } from '../protocol/loopback.js';
import type { ClientContext } from './context.js';
import type { TokenStore } from './token-store.js';

export type BaseUrlSource = 'flag' | 'env' | 'emulator' | 'last-login';

/** `{base_url}` without a trailing slash: the form the issuer and the resource are built from. */
export function normalizeBaseUrl(value: string, from: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ClientError('usage', `${from}: "${value}" is not an absolute URL`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new ClientError('usage', `${from}: "${value}" must be an http(s) URL`);
  if (url.search || url.hash) throw new ClientError('usage', `${from}: "${value}" must not carry a query or fragment`);
  return url.toString().replace(/\/+$/, '');
}

/** An emulator started with `agent-access serve` in this directory (its default state file) that is still running. */
export interface EmulatorHere {
  baseUrl: string;
  /** The kid it signs with (absent from older admin files): which emulator it is, known without asking it. */
  keyId: string | null;
}

export async function emulatorHere(cwd: string): Promise<EmulatorHere | null> {
  const admin = await readAdminFile(adminFileFor(resolve(cwd, DEFAULT_STATE_FILE)));
  if (!admin || typeof admin.base_url !== 'string' || !Number.isInteger(admin.pid) || admin.pid <= 1 || !isAlive(admin.pid)) return null;
  // A file in a directory someone else may have written: only a loopback emulator is believed.
  try {
    const url = new URL(admin.base_url);
    if (url.protocol !== 'http:' || !isLoopbackHost(url.hostname)) return null;
    return {
      baseUrl: normalizeBaseUrl(admin.base_url, "the emulator's admin file"),
      keyId: typeof admin.key_id === 'string' && admin.key_id !== '' ? admin.key_id : null,
    };
  } catch {
    return null;
  }
}

/** Which server a command talks to, where that came from, and the reason in words (for a server it cannot reach). */
export interface ChosenBaseUrl {
  baseUrl: string;
  source: BaseUrlSource;
  /** `the server of the last login (…), used because …`: completes "{base_url} is …". */
  why: string;
  /** The signing key of the emulator running in this directory, when that is the server chosen. */
  emulatorKeyId: string | null;
}

/**
 * Which server a command talks to: `--base-url`, else `$AGENT_ACCESS_BASE_URL`, else an emulator running from
 * this directory, else the server of the newest login. Explicit settings win over discovery.
 */
export async function resolveBaseUrl(ctx: ClientContext, flag: string | undefined, store: TokenStore): Promise<ChosenBaseUrl> {
  const fromEnv = ctx.env[ENV.baseUrl]?.trim();
  const explicit = flag
    ? { baseUrl: normalizeBaseUrl(flag, '--base-url'), source: 'flag' as const, why: 'the server --base-url names' }
    : fromEnv
      ? { baseUrl: normalizeBaseUrl(fromEnv, ENV.baseUrl), source: 'env' as const, why: `the server $${ENV.baseUrl} names` }
      : null;
  // Read for an explicit loopback URL too: whether it is this directory's emulator tells its login apart offline.
  const here = !explicit || isLoopbackHost(new URL(explicit.baseUrl).hostname) ? await emulatorHere(ctx.cwd) : null;
  if (explicit) return { ...explicit, emulatorKeyId: here?.baseUrl === explicit.baseUrl ? here.keyId : null };
  if (here)
    return {
      baseUrl: here.baseUrl,
      source: 'emulator',
      why: `the emulator running in this directory (its admin file ${adminFileFor(DEFAULT_STATE_FILE)})`,
      emulatorKeyId: here.keyId,
    };
  const newest = (await store.list()).filter((r) => r.login).sort((a, b) => b.login!.logged_in_at - a.login!.logged_in_at)[0];
  if (newest)
    return {
      baseUrl: newest.base_url,
      source: 'last-login',
      why:
        `the server of the last login (${new Date(newest.login!.logged_in_at).toISOString()}), used because neither ` +
        `--base-url, $${ENV.baseUrl} nor an emulator running in this directory names one; pass --base-url, or start \`agent-access serve\` here`,
      emulatorKeyId: null,
    };
  throw new ClientError(
    'usage',
    `no server given: pass --base-url URL, set ${ENV.baseUrl}, or start the emulator here with \`agent-access serve\``,
  );
}
