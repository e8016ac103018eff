import { randomUUID } from 'node:crypto';
import { readFileSync, readlinkSync } from 'node:fs';
import { connect } from 'node:net';
import { hostname, uptime } from 'node:os';
import { rm, stat, writeFile } from 'node:fs/promises';
import { isAlive, readAdminFile, type AdminInfo } from '../protocol/admin-file.js';
import type { AnnouncedHolder } from '../store/lock.js';

export async function writeAdminFile(file: string, info: AdminInfo): Promise<void> {
  await rm(file, { force: true });
  await writeFile(file, JSON.stringify(info, null, 2) + '\n', { mode: 0o600, flag: 'wx' });
}

/** A pid reused by a process that started this long after the announcement is another process's for sure. */
const REUSE_MARGIN_MS = 1_000;

/**
 * The emulator this admin file announces, judged now (see AnnouncedHolder). `live` while its pid is alive and its
 * admin port takes connections (a stopped one's does too, the kernel accepts for it). A refused connection means
 * the file was left by a process that died, or by one that is stopping. `gone` when it provably cannot be there
 * any more: the file was written in this pid namespace (and boot), and its pid is not alive, or belongs to a
 * process started after the file was written (a restarted container's new pid 1). A pid that is alive and may be
 * the writer, its port closed (a serve in the middle of stopping), is neither live nor gone.
 */
export async function announcedHolder(file: string): Promise<AnnouncedHolder | null> {
  const info = await readAdminFile(file);
  if (!info || typeof info.pid !== 'number') return null;
  const written = await stat(file).catch(() => null);
  if (!written) return null;
  const alive = isAlive(info.pid);
  const live = alive && !(await refusesConnections(info.admin_url));
  const here = info.pid_namespace === pidNamespace();
  const startedAt = alive && !live && here ? processStartedAt(info.pid) : null;
  const gone = !live && here && (!alive || (startedAt !== null && startedAt > written.mtimeMs + REUSE_MARGIN_MS));
  return { pid: info.pid, file, announcedAt: written.mtimeMs, live, gone };
}

function refusesConnections(url: string): Promise<boolean> {
  let target: URL;
  try {
    target = new URL(url);
  } catch {
    return Promise.resolve(true);
  }
  return new Promise((resolve) => {
    const socket = connect({ host: target.hostname.replace(/^\[(.*)\]$/, '$1'), port: Number(target.port) });
    const done = (refused: boolean) => {
      socket.destroy();
      resolve(refused);
    };
    socket.setTimeout(1_000, () => done(false));
    socket.once('connect', () => done(false));
    socket.once('error', (e: NodeJS.ErrnoException) => done(e.code === 'ECONNREFUSED'));
  });
}

export const removeAdminFile = (file: string): Promise<void> => rm(file, { force: true });

let namespace: string | undefined;

/** This host and pid namespace, as an admin file records it: a pid means the same process only where this matches. */
export function pidNamespace(): string {
  return (namespace ??= readPidNamespace());
}

function readPidNamespace(): string {
  const read = (get: () => string): string => {
    try {
      return get().trim();
    } catch {
      return '';
    }
  };
  // Linux: the boot and the pid namespace exactly. Elsewhere (no pid namespaces): the boot time to the minute; a
  // mismatch only costs the wait for staleness.
  const boot =
    read(() => readFileSync('/proc/sys/kernel/random/boot_id', 'utf8')) || `boot ${Math.round((Date.now() - uptime() * 1000) / 60_000)}`;
  let pids = '';
  if (process.platform === 'linux') {
    // Unknown namespace: matching nobody, not everybody (two containers could share host name and boot).
    pids = read(() => readlinkSync('/proc/self/ns/pid')) || `unknown ${randomUUID()}`;
  }
  return [hostname(), boot, pids].join(' ');
}

/** Ticks of /proc/PID/stat's start time (Linux, USER_HZ), or null. */
function startTicks(pid: number | 'self'): number | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces and parentheses): state is field 3, starttime field 22.
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[19]);
    return Number.isFinite(ticks) ? ticks : null;
  } catch {
    return null;
  }
}

/** When the process with this pid started (ms since the epoch, to about 10 ms), where /proc tells; else null. */
export function processStartedAt(pid: number): number | null {
  const theirs = startTicks(pid);
  const ours = startTicks('self');
  if (theirs === null || ours === null) return null;
  const ourStart = Date.now() - process.uptime() * 1000;
  return ourStart + ((theirs - ours) * 1000) / 100;
}
