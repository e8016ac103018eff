import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { StateFileError, StateLockedError } from '../core/state/errors.js';
import { AS_METADATA_PATH } from '../core/oauth/metadata.js';
import type { StatePersistence } from '../core/state/persistence.js';
import { FilePersistence } from '../store/file-persistence.js';
import { lockStateFile, unlockQuietly, type StateLock } from '../store/lock.js';
import { MemoryPersistence } from '../store/memory-persistence.js';
import { LOCK_LOST } from '../store/writer.js';
import { adminFileFor } from '../protocol/admin-file.js';
import { ADMIN_PREFIX } from '../protocol/admin-api.js';
import { announcedHolder, pidNamespace, removeAdminFile, writeAdminFile } from './admin-file.js';
import type { EmulatorOptions } from './emulator-options.js';
import { ConnectionBudget } from './http-transport.js';
import { alsoOnIpv6Loopback, closeServer } from './ipv6-loopback.js';
import { QuietMoments } from './quiet-moments.js';
import type { Wired } from './wiring.js';

export const DEFAULT_PORT = 4100;
export const DEFAULT_AUTH_PORT = 4101;
/** The default interface; bound to it, both servers listen on ::1 too (STANDARDS "Loopback names"). */
export const DEFAULT_HOST = '127.0.0.1';
const STOP_GRACE_MS = 10_000;
const SETTLE_EVERY_MS = 250;
/** How long the servers must have been idle before a piece of the loading after the ready line runs. */
const QUIET_MS = 50;

type OnError = NonNullable<EmulatorOptions['onError']>;
type OnNotice = NonNullable<EmulatorOptions['onNotice']>;

/** The host part of the service URLs: a wildcard bind is announced as 127.0.0.1, IPv6 literals get brackets. */
function urlHostFor(host: string): string {
  if (host === '0.0.0.0' || host === '::') return '127.0.0.1';
  return host.includes(':') ? `[${host}]` : host;
}

/**
 * What a running emulator holds, taken in order at its start and let go in reverse, once, at its stop: the state
 * file's lock, its persistence, the listeners and their connections, the admin file, the timers. A lock taken over
 * by another process stops it at once, at whatever point of the start or the run.
 */
export class Lifecycle {
  /** Another process took the state file over, or its files went: this one writes nothing more, its admin file included. */
  lost: Error | null = null;
  persistence: StatePersistence | null = null;
  #lock: StateLock | null = null;
  #wired: Wired | null = null;
  #ipv6: Server[] = [];
  #timers: NodeJS.Timeout[] = [];
  #adminFile: string | null = null;
  #stopping: Promise<void> | undefined;

  constructor(
    readonly statePath: string | null,
    private readonly onError: OnError,
    private readonly onNotice: OnNotice,
  ) {}

  /**
   * One writer per state file: its lock, taken before the state is read and held until the stop, while `alongside`
   * (the fixtures) loads. Either failing lets the lock go again.
   */
  async lock<T>(alongside: Promise<T>): Promise<T> {
    const statePath = this.statePath;
    const [value, lock] = await Promise.all([
      alongside,
      statePath
        ? lockStateFile(statePath, {
            holder: () => announcedHolder(adminFileFor(statePath)),
            onNotice: this.onNotice,
            // Another process took the file over: stop at once rather than be a second writer.
            onCompromised: (error) => {
              // Gone with its folder (rm -rf): said as the folder's removal, as when a commit finds it first.
              if (this.persistence instanceof FilePersistence && this.persistence.lostWithFolder()) return;
              const lost = new Error(`lost the lock on ${statePath}; stopping so that only one process writes it (${error.message})`);
              this.lost = lost;
              this.onError(lost, 'lock');
              // Not one more write: stopping lets requests in flight finish, and their saves must not land.
              if (this.persistence instanceof FilePersistence) this.persistence.abandon(lost);
              void this.stop();
            },
          })
        : null,
    ]).catch(async (e: unknown) => {
      if (statePath && !(e instanceof StateLockedError)) await unlockQuietly(statePath);
      throw e;
    });
    this.#lock = lock;
    return value;
  }

  /** Locks a new state file by its identity too, once it exists (lock.ts). */
  identify(): Promise<void> {
    return this.#lock?.identify() ?? Promise.resolve();
  }

  /** The state's persistence: its file and journal, or memory. */
  openPersistence(options: EmulatorOptions): StatePersistence {
    const statePath = this.statePath;
    this.persistence = statePath
      ? new FilePersistence(statePath, {
          journalLimit: options.journalLimit,
          onNotice: this.onNotice,
          lockDir: `${statePath}.lock`,
          // A compaction's new inode is locked as the one before was: a hard link to it cannot be served either.
          onStateFile: () => void this.identify(),
          // Its files were removed under it, or its lock is not its own any more: it acknowledges nothing more (the
          // persistence refuses), and stops.
          onLost: (lost) => {
            const lockLost = (lost as NodeJS.ErrnoException).code === LOCK_LOST;
            // The admin file may be the new holder's already.
            if (lockLost) this.lost ??= lost;
            this.onError(lost, lockLost ? 'lock' : 'state');
            void this.stop();
          },
        })
      : new MemoryPersistence();
    return this.persistence;
  }

  /** The emulator, built: from now on a stop closes its apps. */
  attach(wired: Wired): void {
    this.#wired = wired;
  }

  /**
   * Listens on both ports (and on ::1 beside the default 127.0.0.1), sets the service URLs, and sends the warm-up
   * request, so that ready means ready: a client's first request finds the code every request runs compiled.
   * Returns when the servers have been quiet, for what loads after the ready line.
   */
  async listen(options: EmulatorOptions, host: string): Promise<QuietMoments> {
    const wired = this.#wired;
    if (!wired) throw new Error('listen before the emulator is wired');
    const { api, auth, ports, core } = wired;
    // One bound over every listener's connections, counted from the first.
    const connections = new ConnectionBudget(options.maxConnections);
    for (const server of [api.server, auth.server]) connections.watch(server);
    await Promise.all([
      api.listen({ port: options.port ?? DEFAULT_PORT, host }),
      auth.listen({ port: options.authPort ?? DEFAULT_AUTH_PORT, host }),
    ]);
    ports.api = (api.server.address() as AddressInfo).port;
    ports.auth = (auth.server.address() as AddressInfo).port;
    const urlHost = urlHostFor(host);
    core.setUrls({ baseUrl: `http://${urlHost}:${ports.api}`, authUrl: `http://${urlHost}:${ports.auth}` });
    // A client given http://localhost:P may reach ::1 first, and http://[::1]:P only there: the same apps listen there.
    // Only after setUrls: a request is served once its port is known, so nothing may be awaited between the two.
    if (host === DEFAULT_HOST) {
      const listening = await alsoOnIpv6Loopback([
        { app: api, port: ports.api },
        { app: auth, port: ports.auth },
      ]);
      this.#ipv6 = listening.servers;
      for (const server of this.#ipv6) connections.watch(server);
      if (listening.notice) this.onNotice(listening.notice);
    }
    // Watched before the warm-up, whose request then runs the watcher's code as a client's first would.
    const quiet = new QuietMoments();
    for (const server of [api.server, auth.server, ...this.#ipv6]) quiet.watch(server);
    await wired.warmUp.get(core.urls.baseUrl, AS_METADATA_PATH);
    return quiet;
  }

  /**
   * The apps made ready but bound to nothing (`listen: false`): the service URLs name the ports given (Emulator.start
   * checked both are), and requests come only through `inject`. No warm-up request, and nothing loads after a ready
   * line: the search index is built by the first request that needs it.
   */
  async withoutListening(options: EmulatorOptions, host: string): Promise<void> {
    const wired = this.#wired;
    if (!wired) throw new Error('ready before the emulator is wired');
    const { api, auth, ports, core } = wired;
    await Promise.all([api.ready(), auth.ready()]);
    ports.api = options.port;
    ports.auth = options.authPort;
    const urlHost = urlHostFor(host);
    core.setUrls({ baseUrl: `http://${urlHost}:${ports.api}`, authUrl: `http://${urlHost}:${ports.auth}` });
  }

  /**
   * Tells other command lines where this emulator is (the admin file beside the state file), and again when a
   * snapshot of another state changes the key it signs with, so the file keeps telling this emulator apart truly.
   */
  async announce(wired: Wired): Promise<void> {
    if (!this.statePath) return;
    const adminFile = (this.#adminFile = adminFileFor(this.statePath));
    const { core, adminToken } = wired;
    const announce = (keyId: string) =>
      writeAdminFile(adminFile, {
        admin_url: `${core.urls.baseUrl}${ADMIN_PREFIX}`,
        admin_token: adminToken,
        base_url: core.urls.baseUrl,
        auth_url: core.urls.authUrl,
        pid: process.pid,
        pid_namespace: pidNamespace(),
        key_id: keyId,
      });
    let announced = core.signer.kid;
    await announce(announced);
    wired.afterRestore.also = () => {
      if (core.signer.kid === announced) return;
      announced = core.signer.kid;
      void announce(announced).catch((e: Error) => this.onError(e, 'admin file'));
    };
  }

  /** Retention's pruning, and the job clock: research jobs and training steps move on it, each step published as it happens. */
  startTimers(wired: Wired): void {
    const { core, resources, faults } = wired;
    this.#timers.push(
      setInterval(() => {
        if (core.prune()) void core.commit().catch((e: Error) => this.onError(e, 'prune'));
      }, 60_000).unref(),
      setInterval(
        () => void Promise.all([resources.settle(), faults.runDue()]).catch((e: Error) => this.onError(e, 'settle')),
        SETTLE_EVERY_MS,
      ).unref(),
    );
  }

  /**
   * The search index, which only some requests need (ask, research and the MCP tools), is built after the ready line,
   * a piece at a time and in quiet moments, so that the others are served at full speed meanwhile; a request that
   * needs it builds it at once, or waits for it. (The MCP SDK loads with the first /mcp request: server/mcp.ts.)
   */
  loadAfterReady(wired: Wired, quiet: QuietMoments): Promise<void> {
    return quiet
      .moment(QUIET_MS)
      .then(async () => {
        // An emulator stopped before its quiet moment builds nothing more (tests start and stop many).
        if (!wired.lifecycle.stopping) await wired.resources.search.warmUp();
      })
      .catch((e: Error) => this.onError(e, 'warm-up'));
  }

  /** The last step of a start: a lock lost while starting stops it (the stop it asked for may have found nothing yet). */
  async checkStillHeld(): Promise<void> {
    if (!this.lost || !this.statePath) return;
    await this.stop();
    throw new StateFileError(this.statePath, this.lost.message);
  }

  /** A start that failed lets go of what it took: the apps, its open files, then the lock. */
  async abort(): Promise<void> {
    const wired = this.#wired;
    await Promise.allSettled([...(wired ? [wired.api.close(), wired.auth.close()] : []), ...this.#ipv6.map(closeServer)]);
    // Its open files go too (a test process may try again and again); before the lock is let go.
    await this.persistence?.close().catch(() => undefined);
    await this.#lock?.().catch(() => undefined);
  }

  /** Stops accepting, lets in-flight requests finish, flushes the state, releases the file. Before listening: nothing to stop yet. */
  stop(): Promise<void> {
    const wired = this.#wired;
    if (!wired) return Promise.resolve();
    return (this.#stopping ??= (async () => {
      for (const timer of this.#timers) clearInterval(timer);
      wired.lifecycle.stopping = true;
      const servers = [wired.api.server, wired.auth.server, ...this.#ipv6];
      // In-flight requests finish (their responses close the connection); a client that holds one open longer is cut off.
      const cutOff = setTimeout(() => {
        for (const server of servers) server.closeAllConnections();
      }, STOP_GRACE_MS).unref();
      await Promise.all([wired.api.close(), wired.auth.close(), ...this.#ipv6.map(closeServer)]);
      clearTimeout(cutOff);
      await wired.core.persistence.close();
      // After a takeover the admin file may already be the new holder's.
      if (this.#adminFile && !this.lost) await removeAdminFile(this.#adminFile);
      // A lock that was taken over is no longer ours to release.
      await this.#lock?.().catch(() => undefined);
    })());
  }
}
