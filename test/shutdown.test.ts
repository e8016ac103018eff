import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Emulator } from '../src/server/emulator.js';
import { scratchDir } from './helpers/emulator.js';
import { http } from './helpers/oauth.js';

describe('graceful stop', () => {
  it('stop() lets the request in flight finish, refuses new ones, then releases the state file', async () => {
    const dir = await scratchDir();
    let entered!: () => void;
    const inHandler = new Promise<void>((r) => (entered = r));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const emu = await Emulator.start({
      port: 0,
      authPort: 0,
      state: join(dir, 'state.json'),
      extendApi: (app) => {
        app.get('/slow', async () => {
          entered();
          await gate;
          return { done: true };
        });
      },
    });
    const slow = http(`${emu.baseUrl}/slow`);
    await inHandler;
    let stopped = false;
    const stopping = emu.stop().then(() => (stopped = true));
    await new Promise((r) => setTimeout(r, 50));
    expect(stopped).toBe(false);
    release();
    const res = await slow;
    expect(res.status).toBe(200);
    expect(res.json()).toEqual({ done: true });
    expect(res.headers.connection).toBe('close');
    await stopping;
    await expect(Emulator.start({ port: 0, authPort: 0, state: join(dir, 'state.json') }).then((e) => e.stop())).resolves.toBeUndefined();
  });
});
