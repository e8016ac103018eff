import { access } from 'node:fs/promises';
import { dirname } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { systemClock } from '../core/state/clock.js';
import { chargesReport, type ChargesReport } from '../core/resources/charges-report.js';
import { Core } from '../core/core.js';
import { grantView, listGrants, revokeGrant, type GrantView } from '../core/oauth/grants-admin.js';
import { FilePersistence } from '../store/file-persistence.js';
import { loadFixtures } from '../loaders/fixtures.js';
import { StateLockedError } from '../core/state/errors.js';
import { lockStateFile, realStatePath } from '../store/lock.js';
import { DEFAULT_STATE_FILE, adminFileFor, readAdminFile, type AdminInfo } from '../protocol/admin-file.js';
import { ADMIN_ROUTES, adminPath, allPages, type AdminPage } from '../protocol/admin-api.js';
import { announcedHolder } from '../server/admin-file.js';
import { CLIENT_EXIT, CliError, EXIT } from './errors.js';

/** The operations the CLI needs, whether a running emulator answers them or the file is edited under its lock. */
export interface StateTarget {
  readonly via: 'emulator' | 'file';
  listGrants(filter: { person_id?: string; client_id?: string }): Promise<GrantView[]>;
  revokeGrant(id: string): Promise<GrantView>;
  charges(): Promise<ChargesReport>;
  close(): Promise<void>;
}

class FileTarget implements StateTarget {
  readonly via = 'file';
  constructor(
    private readonly core: Core,
    private readonly release: () => Promise<void>,
  ) {}
  async listGrants(filter: { person_id?: string; client_id?: string }) {
    return listGrants(this.core, filter);
  }
  async revokeGrant(id: string) {
    return grantView(this.core, await revokeGrant(this.core, id, 'admin'));
  }
  async charges() {
    return chargesReport(this.core, await this.core.persistence.readCharges());
  }
  async close() {
    await this.core.persistence.close();
    await this.release();
  }
}

class EmulatorTarget implements StateTarget {
  readonly via = 'emulator';
  constructor(private readonly admin: AdminInfo) {}
  async #call<T>(method: 'GET' | 'POST', path: string): Promise<T> {
    const { adminRequest, AdminError } = await import('../protocol/admin-client.js');
    try {
      return await adminRequest<T>({ adminUrl: this.admin.admin_url, token: this.admin.admin_token }, method, path);
    } catch (e) {
      if (!(e instanceof AdminError))
        throw new CliError(
          `the emulator that holds the state file (pid ${this.admin.pid}) does not answer at ${this.admin.admin_url} ` +
            `(${(e as Error).message}); if it is stopped (Ctrl+Z), let it continue; if it died, retry in a few seconds`,
          EXIT.server,
        );
      if (e.kind === 'not_found') throw new CliError(e.message, EXIT.notFound);
      throw new CliError(`the emulator answered ${e.status}: ${e.message}`, CLIENT_EXIT[e.kind]);
    }
  }
  async listGrants(filter: { person_id?: string; client_id?: string }) {
    const query = new URLSearchParams(Object.entries(filter).filter((e): e is [string, string] => typeof e[1] === 'string')).toString();
    return allPages('grants', `${ADMIN_ROUTES.grants}${query ? `?${query}` : ''}`, (path) =>
      this.#call<AdminPage & { grants: GrantView[] }>('GET', path),
    );
  }
  async revokeGrant(id: string) {
    return (await this.#call<{ grant: GrantView }>('POST', adminPath('revokeGrant', { id }))).grant;
  }
  async charges() {
    return this.#call<ChargesReport>('GET', ADMIN_ROUTES.charges);
  }
  async close() {}
}

const noStateFile = (file: string) =>
  new CliError(`no state file at ${file}; start the emulator with \`agent-access serve\` first, or pass --state`, EXIT.state);

const exists = (path: string): Promise<boolean> =>
  access(path).then(
    () => true,
    () => false,
  );

/**
 * Never two writers on one file: if an emulator holds the state file, act through its admin API; otherwise
 * take the file's lock and work on it directly, through the same core operations.
 */
export async function openStateTarget(stateFlag: string | undefined): Promise<StateTarget> {
  // What the lock and the load repaired or waited for on their own: on stderr, never mixed into the data on stdout.
  const onNotice = (line: string) => void process.stderr.write(`agent-access: ${line}\n`);
  const file = await realStatePath(stateFlag ?? DEFAULT_STATE_FILE);
  // Without its directory there is no state and no emulator (its lock lives there): say so before the lock would
  // create the directory, so that looking leaves nothing behind.
  if (!(await exists(dirname(file)))) throw noStateFile(file);
  // Long enough for one holder that died to go stale (lock.ts), and for a starting emulator to announce itself.
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    let release: () => Promise<void>;
    try {
      release = await lockStateFile(file, { holder: () => announcedHolder(adminFileFor(file)), onNotice });
    } catch (e) {
      if (!(e instanceof StateLockedError)) throw e;
      const admin = await readAdminFile(adminFileFor(file));
      if (admin) return new EmulatorTarget(admin);
      await sleep(100); // the holder is starting up, or is another short CLI call
      continue;
    }
    try {
      await access(file);
    } catch {
      await release();
      throw noStateFile(file);
    }
    try {
      const fixtures = await loadFixtures();
      const core = await Core.open({ clock: systemClock, persistence: new FilePersistence(file, { onNotice }), persons: fixtures.persons });
      return new FileTarget(core, release);
    } catch (e) {
      await release();
      throw e;
    }
  }
  throw new CliError(
    `state file ${file} is locked by another process and no running emulator announced itself (${adminFileFor(file)})`,
    EXIT.state,
  );
}
