import { mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { StateFileError, StateLockedError } from '../src/core/state/errors.js';
import { listGrants, revokeGrant } from '../src/core/oauth/grants-admin.js';
import { adminFileFor } from '../src/protocol/admin-file.js';
import { Emulator } from '../src/server/emulator.js';
import { lockStateFile } from '../src/store/lock.js';
import { readStateAt } from '../src/store/file-persistence.js';
import { scratchDir, startEmulator } from './helpers/emulator.js';
import { authorizeAndApprove, refresh, register } from './helpers/oauth.js';

describe('state file: one lowdb JSON file, durable, 0600, secrets hashed', () => {
  it('an emulator without listeners (listen: false) keeps its state file but writes no admin file: no other process could reach it', async () => {
    const state = join(await scratchDir(), 'state.json');
    const emu = await Emulator.start({ state, listen: false, port: 24_090, authPort: 24_091 });
    try {
      await emu.core.commit();
      expect(emu.adminFile).toBe(adminFileFor(state));
      expect(existsSync(adminFileFor(state))).toBe(false);
    } finally {
      await emu.stop();
    }
    expect(await readStateAt(state)).not.toBeNull();
  });

  it('is created 0600 in a 0700 directory, each folder it makes 0700 (and synced into its parent)', async () => {
    const dir = await scratchDir();
    const state = join(dir, 'nested', 'deeper', 'state.json');
    await startEmulator({ state });
    expect((await stat(state)).mode & 0o777).toBe(0o600);
    expect((await stat(join(dir, 'nested'))).mode & 0o777).toBe(0o700);
    expect((await stat(join(dir, 'nested', 'deeper'))).mode & 0o777).toBe(0o700);
    expect((await stat(join(dir, 'nested', 'deeper', 'state.admin.json'))).mode & 0o777).toBe(0o600);
  });

  it('a change is on disk before the request is answered', async () => {
    const dir = await scratchDir();
    const state = join(dir, 'state.json');
    const emu = await startEmulator({ state });
    const { client_id } = await register(emu.baseUrl);
    expect((await readStateAt(state))!.clients[client_id]).toMatchObject({ client_name: 'Test Agent' });
  });

  it('after every answer the state file with its journal replayed is exactly the state; a change replaces an entry, never edits it', async () => {
    const dir = await scratchDir();
    const state = join(dir, 'state.json');
    const emu = await startEmulator({ state });
    const flow = await authorizeAndApprove(emu);
    const onDisk = async () => `${JSON.stringify(await readStateAt(state))}\n`;
    expect(await onDisk()).toBe(`${JSON.stringify(emu.core.state)}\n`);
    let refreshToken = flow.tokens!.refresh_token;
    for (let i = 0; i < 3; i++) {
      const before = emu.core.state.families[Object.keys(emu.core.state.families)[0]!]!;
      const next = await refresh(emu.baseUrl, { client_id: flow.client_id, refresh_token: refreshToken });
      expect(next.status).toBe(200);
      refreshToken = next.json().refresh_token;
      // The rotation replaced the family: the value read before is frozen and unchanged.
      expect(Object.isFrozen(before) && Object.isFrozen(before.current)).toBe(true);
      expect(emu.core.state.families[before.id]).not.toBe(before);
      expect(await onDisk()).toBe(`${JSON.stringify(emu.core.state)}\n`);
    }
    await revokeGrant(emu.core, Object.keys(emu.core.state.grants)[0]!, 'person');
    expect(await onDisk()).toBe(`${JSON.stringify(emu.core.state)}\n`);
    // At rest after a clean stop the state file alone holds everything: JSON.stringify of the state, and where the journal ended.
    const final = `${JSON.stringify(emu.core.state)}`;
    await emu.stop();
    expect(existsSync(join(dir, 'state.journal.jsonl'))).toBe(false);
    const atRest = await readFile(state, 'utf8');
    const { journal_seq } = JSON.parse(atRest) as { journal_seq: number };
    // One entry per line; without the line breaks it is JSON.stringify of the state, exactly.
    expect(atRest.slice(0, -1).replace(/\n/g, '')).toBe(`${final.slice(0, -1)},"journal_seq":${journal_seq}}`);
    expect(atRest.split('\n').find((line) => line.includes('"client_name"'))).toMatch(/^,?"client_[^"]+":\{"client_id"/);
  });

  it('codes and refresh tokens are stored only as hashes', async () => {
    const dir = await scratchDir();
    const state = join(dir, 'state.json');
    const emu = await startEmulator({ state });
    const pending = await authorizeAndApprove(emu, { exchange: false });
    const flow = await authorizeAndApprove(emu);
    const raw = await readFile(state, 'utf8');
    const [, handle, secret] = flow.tokens!.refresh_token.split('.');
    for (const secretValue of [pending.code, flow.code, flow.tokens!.refresh_token, handle!, secret!])
      expect(raw).not.toContain(secretValue);
  });

  it('survives a restart: same signing key, grants and families; the refresh token still works', async () => {
    const dir = await scratchDir();
    const state = join(dir, 'state.json');
    const first = await Emulator.start({ port: 0, authPort: 0, state });
    const flow = await authorizeAndApprove(first);
    const kid = first.core.state.keys[0]!.kid;
    await first.stop();
    const second = await startEmulator({ state });
    expect(second.core.state.keys[0]!.kid).toBe(kid);
    expect(listGrants(second.core)).toHaveLength(1);
    const res = await refresh(second.baseUrl, { client_id: flow.client_id, refresh_token: flow.tokens!.refresh_token });
    expect(res.status).toBe(200);
  });

  it.each([
    ['not JSON', '{"version": 1, "keys": ['],
    ['another version', JSON.stringify({ version: 2, keys: [] })],
    [
      'a malformed grant',
      JSON.stringify({
        version: 1,
        keys: [],
        clients: {},
        grants: { g: { scopes: 'ask' } },
        codes: {},
        families: {},
        revoked_access_tokens: {},
      }),
    ],
    ['an array', '[]'],
    [
      'a signing key without its private part',
      JSON.stringify({
        version: 1,
        keys: [{ kid: 'k', alg: 'ES256', created_at: 0, private_jwk: {}, public_jwk: {} }],
        clients: {},
        grants: {},
        codes: {},
        families: {},
        revoked_access_tokens: {},
      }),
    ],
  ])('a state file that is %s stops the server with the file named and the way out; the file is untouched', async (_why, content) => {
    const dir = await scratchDir();
    const state = join(dir, 'state.json');
    await writeFile(state, content, { mode: 0o600 });
    const error = await Emulator.start({ port: 0, authPort: 0, state }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StateFileError);
    expect((error as Error).message).toContain(state);
    expect((error as Error).message).toContain('--in-memory');
    expect(await readFile(state, 'utf8')).toBe(content);
    expect(existsSync(`${state}.lock`)).toBe(false);
  });

  it('an unreadable state file (a directory) stops the server with a clear message', async () => {
    const dir = await scratchDir();
    const state = join(dir, 'state.json');
    await mkdir(state);
    const error = await Emulator.start({ port: 0, authPort: 0, state }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StateFileError);
    expect((error as Error).message).toMatch(/cannot read state file .*EISDIR/);
  });

  it('one writer: a second emulator on the same file is refused', async () => {
    const dir = await scratchDir();
    const state = join(dir, 'state.json');
    await startEmulator({ state });
    await expect(Emulator.start({ port: 0, authPort: 0, state })).rejects.toBeInstanceOf(StateLockedError);
  });

  it('one writer: an emulator whose lock another process took over stops and writes nothing more', async () => {
    const dir = await scratchDir();
    const state = join(dir, 'state.json');
    let noticed!: () => void;
    const lockLost = new Promise<void>((resolve) => (noticed = resolve));
    const emu = await Emulator.start({ port: 0, authPort: 0, state, onError: (_error, context) => context === 'lock' && noticed() });
    // Another process takes the file over: the lock directory is replaced by one of its own.
    await rm(`${state}.lock`, { recursive: true });
    const release = await lockStateFile(state);
    try {
      await lockLost;
      await writeFile(state, 'the new owner\n');
      await writeFile(join(dir, 'state.admin.json'), '{"the new owner":true}\n');
      await expect(emu.core.persistence.commit(emu.core.repo)).rejects.toThrow(/lost the lock/);
      await emu.stop();
      expect(await readFile(state, 'utf8')).toBe('the new owner\n');
      // Its admin file too belongs to the new owner now: the old emulator leaves it alone.
      expect(await readFile(join(dir, 'state.admin.json'), 'utf8')).toBe('{"the new owner":true}\n');
    } finally {
      await release();
    }
  });

  it('a start that fails after listening closes both servers and releases the file', async () => {
    const dir = await scratchDir();
    const state = join(dir, 'state.json');
    await mkdir(join(dir, 'state.admin.json')); // the admin file cannot be written
    const probe = await Emulator.start({ port: 0, authPort: 0, inMemory: true });
    const [port, authPort] = [Number(new URL(probe.baseUrl).port), Number(new URL(probe.authUrl).port)];
    await probe.stop();
    await expect(Emulator.start({ port, authPort, state })).rejects.toThrow();
    const again = await startEmulator({ port, authPort, state: join(dir, 'other.json') });
    expect(again.baseUrl).toBe(`http://127.0.0.1:${port}`);
    await expect(startEmulator({ port: 0, authPort: 0, state: join(dir, 'third.json') })).resolves.toBeTruthy();
    expect(existsSync(`${state}.lock`)).toBe(false);
  });

  it('--in-memory writes nothing', async () => {
    const dir = await scratchDir();
    const emu = await startEmulator({ inMemory: true, state: join(dir, 'state.json') });
    await register(emu.baseUrl);
    expect(existsSync(join(dir, 'state.json'))).toBe(false);
  });
});
