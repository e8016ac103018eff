import { createHash, randomBytes } from 'node:crypto';
import { chmod, mkdir, open, readFile, readdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { ClientError } from '../protocol/errors.js';

/** A client registration, cached per server and redirect URI (registration is open, but needs doing once). */
export interface CachedClient {
  client_id: string;
  redirect_uri: string;
  registered_at: number;
}

/** What one login holds. Times are milliseconds on the client's clock. */
export interface StoredLogin {
  client_id: string;
  redirect_uri: string;
  /** Granted scopes, space-separated, as the token endpoint last said. */
  scope: string;
  /** The `resource` asked for at login, or null for an identity token (`--identity`). */
  resource: string | null;
  access_token: string;
  refresh_token: string | null;
  expires_at: number;
  token_obtained_at: number;
  refresh_obtained_at: number | null;
  logged_in_at: number;
  refresh_count: number;
}

/** A login and the registrations of an emulator that is not the one on its address now, kept for when it is back. */
export interface ParkedLogin {
  clients: Record<string, CachedClient>;
  login: StoredLogin | null;
  parked_at: number;
}

/**
 * One file per server (base URL): its discovered issuer, its client registrations and the current login. On a
 * loopback address, emulators of several projects take turns (each with its own signing key, kept in its state
 * folder): the record holds the one whose key signed the current login, and parks the others' by their key.
 */
export interface ServerRecord {
  base_url: string;
  issuer: string | null;
  clients: Record<string, CachedClient>;
  login: StoredLogin | null;
  /** The `kid` that signed the current login's access token: which server it belongs to. */
  key_id?: string | null;
  /** Logins of the other servers seen on this address, by their key id. */
  parked?: Record<string, ParkedLogin>;
}

/** Other emulators' logins kept per address: the oldest goes first (each costs one consent to make again). */
export const MAX_PARKED = 8;

const emptyRecord = (baseUrl: string): ServerRecord => ({ base_url: baseUrl, issuer: null, clients: {}, login: null });

/** The `kid` in a JWT's protected header, or null for an opaque token (then servers cannot be told apart by it). */
export async function keyIdOf(token: string | undefined): Promise<string | null> {
  if (!token) return null;
  // Loaded when needed: `token` with a valid token and a known key id never decodes one.
  const { decodeProtectedHeader } = await import('jose/decode/protected_header');
  try {
    const { kid } = decodeProtectedHeader(token);
    return typeof kid === 'string' && kid !== '' ? kid : null;
  } catch {
    return null;
  }
}

/** Which server the record's login and registrations belong to, by signing key; null when that cannot be told. */
export const identityOf = async (record: ServerRecord): Promise<string | null> =>
  record.key_id ?? (await keyIdOf(record.login?.access_token));

/**
 * The record for the server whose signing keys are `keys`, now on this address: unchanged when its login is that
 * server's (or cannot be told apart); else the login there is parked under its key, and the one parked under one
 * of `keys` (if any) comes back. `key_id` stays null until a login tells it.
 */
export async function forServer(record: ServerRecord, keys: ReadonlySet<string>, now: number): Promise<ServerRecord | null> {
  const current = await identityOf(record);
  if (current === null || keys.has(current)) return null;
  const parked = { ...record.parked };
  if (record.login || Object.keys(record.clients).length > 0)
    parked[current] = { clients: record.clients, login: record.login, parked_at: now };
  const back = [...keys].find((key) => parked[key]);
  const returning = back === undefined ? undefined : parked[back];
  if (back !== undefined) delete parked[back];
  const kept = Object.entries(parked)
    .sort(([, a], [, b]) => b.parked_at - a.parked_at)
    .slice(0, MAX_PARKED);
  return {
    ...record,
    key_id: back ?? null,
    clients: returning?.clients ?? {},
    login: returning?.login ?? null,
    parked: Object.fromEntries(kept),
  };
}

/** The lock is refreshed while held; a holder silent this long is dead and its lock is taken over. */
const LOCK_STALE_MS = 10_000;

/**
 * Tokens per base URL under the config directory, in files only the user may read (0600, directory 0700).
 * Every change runs under a file lock and starts from a fresh read, so two processes never both spend one
 * refresh token (which would be a replay and end the whole token family).
 */
export class TokenStore {
  readonly dir: string;
  constructor(configDir: string) {
    this.dir = join(configDir, 'servers');
  }

  /** `servers/<host>_<port>-<hash>.json`: readable for people, unique per exact base URL. */
  fileFor(baseUrl: string): string {
    const url = new URL(baseUrl);
    const readable = `${url.hostname.replace(/[^a-zA-Z0-9.-]/g, '_')}_${url.port || (url.protocol === 'https:' ? '443' : '80')}`;
    const hash = createHash('sha256').update(baseUrl).digest('hex').slice(0, 12);
    return join(this.dir, `${readable}-${hash}.json`);
  }

  async read(baseUrl: string): Promise<ServerRecord> {
    return (await this.#load(this.fileFor(baseUrl), baseUrl)) ?? emptyRecord(baseUrl);
  }

  /** Every server with a stored record (for `status --all` and the last-login fallback). */
  async list(): Promise<ServerRecord[]> {
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch {
      return [];
    }
    const records: ServerRecord[] = [];
    for (const name of names.filter((n) => n.endsWith('.json')).sort()) {
      const record = await this.#load(join(this.dir, name), null);
      if (record) records.push(record);
    }
    return records;
  }

  /**
   * Runs `change` on a fresh read of the record under the file lock and writes back what it returns
   * (`undefined`: nothing to write). The lock is held across `change`, network calls included.
   */
  async update<T>(baseUrl: string, change: (record: ServerRecord) => Promise<{ record?: ServerRecord; result: T }>): Promise<T> {
    const file = this.fileFor(baseUrl);
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    let release: () => Promise<void>;
    let compromised: Error | undefined;
    // Loaded here: only a change takes the lock, and `agent-access token` with a valid token changes nothing.
    const { default: lockfile } = await import('proper-lockfile');
    try {
      release = await lockfile.lock(file, {
        realpath: false,
        stale: LOCK_STALE_MS,
        update: LOCK_STALE_MS / 5,
        retries: { retries: 600, factor: 1.2, minTimeout: 20, maxTimeout: 250 },
        // The default throws from a timer (an uncaught crash); here the change is refused instead.
        onCompromised: (e) => (compromised = e),
      });
    } catch (e) {
      throw new ClientError('failed', `cannot lock the token store ${file}: ${(e as Error).message}`);
    }
    try {
      const { record, result } = await change((await this.#load(file, baseUrl)) ?? emptyRecord(baseUrl));
      if (compromised) throw new ClientError('failed', `lost the lock on the token store ${file} (${compromised.message}); try again`);
      if (record) await this.#write(file, record);
      return result;
    } finally {
      await release().catch(() => undefined);
    }
  }

  async #load(file: string, baseUrl: string | null): Promise<ServerRecord | null> {
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw new ClientError('failed', `cannot read the token store ${file}: ${(e as Error).message}`);
    }
    try {
      const record = JSON.parse(text) as ServerRecord;
      if (typeof record.base_url !== 'string' || (baseUrl !== null && record.base_url !== baseUrl))
        throw new Error('it belongs to another server');
      return { ...emptyRecord(record.base_url), ...record, clients: record.clients ?? {} };
    } catch (e) {
      throw new ClientError(
        'failed',
        `the token store ${file} is damaged (${(e as Error).message}); delete it and run \`agent-access login\` again`,
      );
    }
  }

  /** Temp file (0600, exclusive) then rename: a reader sees the old record or the new one, never half. */
  async #write(file: string, record: ServerRecord): Promise<void> {
    const temp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
    const handle = await open(temp, 'wx', 0o600);
    try {
      await handle.writeFile(JSON.stringify(record, null, 2) + '\n');
      await handle.sync();
    } finally {
      await handle.close();
    }
    try {
      await rename(temp, file);
      await chmod(file, 0o600);
    } catch (e) {
      await rm(temp, { force: true });
      throw e;
    }
  }
}
