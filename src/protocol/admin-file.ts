import { readFile } from 'node:fs/promises';

/** Where `serve` keeps state unless told otherwise, relative to its working directory. */
export const DEFAULT_STATE_FILE = '.agent-access/state.json';

/** What `serve` writes (0600) next to the state file so the CLI can reach it: `FILE.json` → `FILE.admin.json`. */
export interface AdminInfo {
  admin_url: string;
  admin_token: string;
  base_url: string;
  auth_url: string;
  pid: number;
  /** Where `pid` means this process: host, boot and pid namespace (pidNamespace()). Absent in files of older versions. */
  pid_namespace?: string;
  /**
   * The `kid` of the key it signs access tokens with, which comes with its state folder: tells it from another
   * emulator on the same address, offline (the client keeps one login per emulator). Absent in older files.
   */
  key_id?: string;
}

export const adminFileFor = (stateFile: string): string => `${stateFile.replace(/\.json$/i, '')}.admin.json`;

/** The admin file's content, or null when it is missing or is not one (a reader never trusts it further than that). */
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

/** Whether a process with this pid exists (EPERM: it does, under another user). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}
