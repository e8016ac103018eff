import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';
import { startEmulator as startWithApi, type RunningEmulator, type StartEmulatorOptions } from '../../src/index.js';
import { Emulator, type EmulatorOptions } from '../../src/server/emulator.js';
import { nextPorts, serveInProcess } from './in-process.js';

export const tempDir = async (prefix = 'agent-access-'): Promise<string> => mkdtemp(join(tmpdir(), prefix));

/**
 * Undoes `undo` when the running test has finished. A hook per test rather than one `afterEach` for the module: the
 * unit and integration tests share their modules between files (vitest.config.ts), and a module's hooks would serve
 * its first file only.
 */
const afterTest = (undo: () => Promise<void>): void => onTestFinished(undo);

/** Starts an emulator on free ports (in memory unless a state file is given) and stops it after the test. */
export async function startEmulator(options: EmulatorOptions = {}): Promise<Emulator> {
  const emulator = await Emulator.start({ port: 0, authPort: 0, inMemory: options.state === undefined, ...options });
  afterTest(() => emulator.stop());
  return emulator;
}

/**
 * Starts an emulator in memory that binds nothing: the tests' `http()` reaches it through its `inject`, in this
 * process (helpers/in-process.ts). Stopped after the test.
 */
export async function startInProcess(options: Omit<EmulatorOptions, 'port' | 'authPort' | 'listen' | 'state'> = {}): Promise<Emulator> {
  const emulator = await Emulator.start({ ...options, ...nextPorts(), listen: false, inMemory: true });
  const forget = serveInProcess(emulator);
  afterTest(async () => {
    forget();
    await emulator.stop();
  });
  return emulator;
}

/** Starts an emulator through the programmatic API (src/index.ts), in this process or as a child, and stops it after the test. */
export async function startRunning(options: StartEmulatorOptions = {}): Promise<RunningEmulator> {
  const emulator = await startWithApi(options);
  afterTest(() => emulator.stop());
  return emulator;
}

/** A temp dir removed after the test. */
export async function scratchDir(): Promise<string> {
  const dir = await tempDir();
  afterTest(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * What a process killed in the middle of a commit leaves beside a state file that stopped cleanly before: a journal
 * (a commit makes it before it appends ledger lines; empty if the kill came before its record). A start after it
 * drops ledger lines beyond the state's count; without one it refuses them.
 */
export async function leaveJournalBehind(state: string): Promise<void> {
  await writeFile(`${state.replace(/\.json$/i, '')}.journal.jsonl`, '', { flag: 'a', mode: 0o600 });
}
