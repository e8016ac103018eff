import { mkdir, open, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { describe, expect, it, vi } from 'vitest';
import { DurableJsonFile } from '../src/store/durable-json-file.js';
import { scratchDir } from './helpers/emulator.js';

const adapter = (file: string) => new DurableJsonFile<{ n: number; items: number[] }>(file, (text) => JSON.parse(text));

describe('DurableJsonFile: atomic, durable, coalesced writes', () => {
  it('every save resolves once its data is on disk; saves made in one turn share one snapshot', async () => {
    const dir = await scratchDir();
    const file = join(dir, 'state.json');
    const store = adapter(file);
    const state = { n: 0, items: [] as number[] };
    const saves: Array<Promise<void>> = [];
    for (let i = 1; i <= 200; i++) {
      state.n = i;
      state.items.push(i);
      saves.push(store.write(state).then(async () => {
        // When a save resolves, the file holds at least that save's change.
        const onDisk = JSON.parse(await readFile(file, 'utf8'));
        expect(onDisk.n).toBeGreaterThanOrEqual(i);
      }));
    }
    await Promise.all(saves);
    expect(JSON.parse(await readFile(file, 'utf8'))).toEqual({ n: 200, items: Array.from({ length: 200 }, (_, k) => k + 1) });
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    await store.close();
  });

  it('group commit: the next snapshot reaches the writer before the answers of the batch just written go out', async () => {
    const dir = await scratchDir();
    const store = adapter(join(dir, 'state.json'));
    const post = vi.spyOn(Worker.prototype, 'postMessage');
    const snapshotsPosted = () => post.mock.calls.filter(([message]) => (message as { bytes?: unknown }).bytes !== undefined).length;
    try {
      const first = store.write({ n: 1, items: [] });
      while (snapshotsPosted() < 1) await new Promise((resolve) => setImmediate(resolve));
      // Asked for while the first is being written: it waits, and goes to the writer when the first is durable.
      const second = store.write({ n: 2, items: [] });
      let postedWhenFirstAnswered = -1;
      await Promise.all([first.then(() => (postedWhenFirstAnswered = snapshotsPosted())), second]);
      // The writer must not sit idle while the first batch's answers are sent.
      expect(postedWhenFirstAnswered).toBe(2);
    } finally {
      post.mockRestore();
      await store.close();
    }
  });

  it('the file is the UTF-8 of the JSON text, non-ASCII included', async () => {
    const dir = await scratchDir();
    const file = join(dir, 'state.json');
    const store = new DurableJsonFile<{ name: string }>(file, (text) => JSON.parse(text));
    await store.write({ name: 'Prüf-Agent ✓ 🤖' });
    expect(await readFile(file)).toEqual(Buffer.from('{"name":"Prüf-Agent ✓ 🤖"}\n', 'utf8'));
    await store.close();
  });

  it('a reader never sees half a file while writes run', async () => {
    const dir = await scratchDir();
    const file = join(dir, 'state.json');
    const store = adapter(file);
    const state = { n: 0, items: Array.from({ length: 20_000 }, (_, k) => k) };
    await store.write(state);
    let reads = 0;
    const writer = (async () => {
      for (let i = 0; i < 30; i++) {
        state.n = i;
        await store.write(state);
      }
    })();
    while (reads < 200) {
      JSON.parse(await readFile(file, 'utf8'));
      reads++;
    }
    await writer;
    await store.close();
  });

  it('each snapshot goes to a new file: a reader holding the file keeps the version it opened', async () => {
    const dir = await scratchDir();
    const file = join(dir, 'state.json');
    const store = adapter(file);
    await store.write({ n: 1, items: [1] });
    const held = await open(file, 'r');
    try {
      for (let n = 2; n <= 5; n++) await store.write({ n, items: [n] });
      expect(JSON.parse(await held.readFile('utf8'))).toEqual({ n: 1, items: [1] });
      expect(JSON.parse(await readFile(file, 'utf8'))).toEqual({ n: 5, items: [5] });
    } finally {
      await held.close();
    }
    await store.close();
  });

  it('temp files a killed writer left behind are removed, those of another state file are not; after close nothing else is left', async () => {
    const dir = await scratchDir();
    const file = join(dir, 'state.json');
    // One left by a writer that was killed before it could close, and a temp file of another state file beside it.
    await writeFile(join(dir, '.state.json.LeftByCrash0.tmp'), '');
    await writeFile(join(dir, '.state.json.2.Other_file_1.tmp'), '');
    const store = adapter(file);
    for (let n = 1; n <= 3; n++) await store.write({ n, items: [] });
    await store.close();
    expect((await readdir(dir)).sort()).toEqual(['.state.json.2.Other_file_1.tmp', 'state.json']);
  });

  it.skipIf(!existsSync('/proc/self/fd'))('the writer holds one file at a time and lets go of it on close', async () => {
    const openFiles = async () => (await readdir('/proc/self/fd')).length;
    const dir = await scratchDir();
    const file = join(dir, 'state.json');
    const before = await openFiles();
    const store = adapter(file);
    await store.write({ n: 0, items: [] });
    const running = await openFiles();
    for (let n = 1; n <= 20; n++) await store.write({ n, items: [] });
    // The file a write replaced is let go of just after its acknowledgement: at most one more for a moment.
    expect(await openFiles()).toBeLessThanOrEqual(running + 1);
    await store.close();
    expect(await openFiles()).toBeLessThanOrEqual(before);
  });

  it('a write asked for while the store closes is written by a writer of its own', async () => {
    const dir = await scratchDir();
    const file = join(dir, 'state.json');
    const store = adapter(file);
    await store.write({ n: 1, items: [] });
    const closing = store.close();
    await Promise.resolve();
    const late = store.write({ n: 2, items: [] });
    await Promise.all([closing, late]);
    expect(JSON.parse(await readFile(file, 'utf8')).n).toBe(2);
    await store.close();
  });

  it('a failed write rejects the saves that waited for it, and later saves still work', async () => {
    const dir = await scratchDir();
    const file = join(dir, 'sub', 'state.json');
    const store = adapter(file);
    await store.write({ n: 1, items: [] });
    // The directory becomes a plain file: the next write fails (ENOTDIR), for root as well.
    await rm(join(dir, 'sub'), { recursive: true });
    await writeFile(join(dir, 'sub'), 'not a directory');
    await expect(store.write({ n: 2, items: [] })).rejects.toThrow(/cannot write state file .*ENOTDIR|not a directory/i);
    await rm(join(dir, 'sub'));
    await mkdir(join(dir, 'sub'));
    await store.write({ n: 3, items: [] });
    expect(JSON.parse(await readFile(file, 'utf8')).n).toBe(3);
    await store.close();
  });

  it('abandoned (the lock was taken over): saves waiting and saves after it fail, and nothing more reaches the file', async () => {
    const dir = await scratchDir();
    const file = join(dir, 'state.json');
    const store = adapter(file);
    await store.write({ n: 1, items: [] });
    const waiting = store.write({ n: 2, items: [] });
    const lost = new Error('lost the lock');
    store.abandon(lost);
    await expect(waiting).rejects.toBe(lost);
    // The new owner's file.
    await writeFile(file, '{"n":99,"items":[]}\n');
    await expect(store.write({ n: 3, items: [] })).rejects.toBe(lost);
    await store.flush();
    await store.close();
    expect(await readFile(file, 'utf8')).toBe('{"n":99,"items":[]}\n');
  });

  it('flush waits for what is pending; close ends the writer thread', async () => {
    const dir = await scratchDir();
    const file = join(dir, 'state.json');
    const store = adapter(file);
    void store.write({ n: 7, items: [] });
    await store.flush();
    expect(JSON.parse(await readFile(file, 'utf8')).n).toBe(7);
    await store.close();
    await store.write({ n: 8, items: [] });
    expect(JSON.parse(await readFile(file, 'utf8')).n).toBe(8);
    await store.close();
  });
});
