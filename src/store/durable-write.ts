import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { mkdir, open, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

/** A file's text, or null when it does not exist. */
export async function readOptional(file: string): Promise<string | null> {
  try {
    return await readFile(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw e;
  }
}

/** A fresh temp file's name beside `file` (a start removes those a killed process left, see writer.ts). */
export const tempName = (file: string): string => join(dirname(file), `.${basename(file)}.${randomBytes(9).toString('base64url')}.tmp`);

/** Whether `name` (in the folder of `file`) is exactly one that `tempName` makes for `file`. */
export const isTempOf = (file: string, name: string): boolean => {
  const prefix = `.${basename(file)}.`;
  return name.length === prefix.length + 16 && name.startsWith(prefix) && /^[A-Za-z0-9_-]{12}\.tmp$/.test(name.slice(prefix.length));
};

/** Writes `text` to `file`: a fresh temp file 0600 (never a symlink), fdatasync, rename, directory fsync. */
export async function writeFileDurably(file: string, text: string | Uint8Array): Promise<void> {
  const temp = tempName(file);
  const handle = await open(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    try {
      await handle.writeFile(text);
      await handle.datasync();
    } finally {
      await handle.close();
    }
    await rename(temp, file);
  } catch (e) {
    await rm(temp, { force: true });
    throw e;
  }
  await syncDir(dirname(file));
}

/** fsync of a directory: what was created, renamed or removed in it is on disk. */
export async function syncDir(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** What a state folder's own .gitignore says. */
export const GITIGNORE = '# made by agent-access: the state, its signing key and logs are never committed\n*\n';

/**
 * `mkdir -p` of `dir` (0700) that lasts through a power loss: each folder made is synced into its parent, as a file
 * created in it is by its writer.
 */
export async function makeDirDurably(dir: string, options: { gitignore?: boolean } = {}): Promise<void> {
  const first = await mkdir(dir, { recursive: true, mode: 0o700 });
  if (first === undefined) return;
  // A folder the emulator made for its state holds the signing key: git is told to leave all of it out.
  if (options.gitignore) await writeFile(join(dir, '.gitignore'), GITIGNORE, { mode: 0o600, flag: 'wx' });
  // Up to the first folder made (mkdir's answer is always one of dir's own), and never past the root.
  for (let made = dir; ; made = dirname(made)) {
    await syncDir(dirname(made));
    if (made === first || dirname(made) === made) return;
  }
}
