import { readFile } from 'node:fs/promises';
import { basename, resolve } from 'node:path';
import { AgentAccessError } from '../core/state/errors.js';
import { parseProfile, type VariantProfile } from '../core/emulation/variant-profile.js';

/** A profile file that cannot be used (`serve --profile`); the message names the file and what is wrong. */
export class ProfileError extends AgentAccessError {
  readonly file: string;
  constructor(file: string, message: string) {
    super('profile_invalid', message);
    this.file = file;
  }
}

/** A profile the emulator answers with: its name (the file's, for the Agent-Access-Variant header), its path, and it. */
export interface LoadedProfile {
  name: string;
  file: string;
  profile: VariantProfile;
}

/** Reads and checks a profile file (issue 43.3); every problem is a ProfileError naming the file. */
export async function loadProfile(file: string): Promise<LoadedProfile> {
  const path = resolve(file);
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (e) {
    throw new ProfileError(path, `profile ${path} cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new ProfileError(path, `profile ${path} is not valid JSON (${(e as Error).message})`);
  }
  try {
    return { name: basename(path), file: path, profile: parseProfile(json) };
  } catch (e) {
    throw new ProfileError(path, `profile ${path} is not valid: ${(e as Error).message}`);
  }
}
