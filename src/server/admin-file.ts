import { connect } from 'node:net';
import { readFile, rm, writeFile } from 'node:fs/promises';

/** Where `serve` keeps state unless told otherwise, relative to its working directory. */
export const DEFAULT_STATE_FILE = '.agent-access/state.json';

/** What `serve` writes (0600) next to the state file so the CLI can reach it: `FILE.json` → `FILE.admin.json`. */
export interface AdminInfo {
  admin_url: string;
  admin_token: string;
  base_url: string;
  auth_url: string;
  pid: number;
}

export const adminFileFor = (stateFile: string): string => `${stateFile.replace(/\.json$/i, '')}.admin.json`;

export async function writeAdminFile(file: string, info: AdminInfo): Promise<void> {
  await rm(file, { force: true });
  await writeFile(file, JSON.stringify(info, null, 2) + '\n', { mode: 0o600, flag: 'wx' });
}

export async function readAdminFile(file: string): Promise<AdminInfo | null> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch {
    return null;
  }
  try {
    const info = JSON.parse(text) as Partial<AdminInfo>;
    if (typeof info.admin_url !== 'string' || typeof info.admin_token !== 'string') return null;
    return info as AdminInfo;
  } catch {
    return null;
  }
}

/**
 * The pid of the emulator this admin file announces, while that emulator may still be there: its admin port
 * takes connections (a stopped one's does too, the kernel accepts for it). A refused connection means the file
 * was left by a process that died, whatever runs under its pid now (after a restart, a container's new pid 1).
 */
export async function announcedHolderPid(file: string): Promise<number | null> {
  const info = await readAdminFile(file);
  if (!info || typeof info.pid !== 'number') return null;
  return (await refusesConnections(info.admin_url)) ? null : info.pid;
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
