import { request } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { CALLBACK_PATH, LoopbackReceiver, type CallbackOutcome } from '../src/client/loopback.js';

/** The login's redirect target (RFC 8252 §7.3), on a real socket in this process. */
const receivers: LoopbackReceiver<string>[] = [];
afterEach(async () => {
  for (const r of receivers.splice(0)) await r.close();
});

async function listen(handle: (url: URL) => Promise<CallbackOutcome<string>>): Promise<LoopbackReceiver<string>> {
  const receiver = await LoopbackReceiver.listen<string>(0, handle);
  receivers.push(receiver);
  return receiver;
}

/** A GET of the callback with its answer's status and headers, or the socket error. */
const get = (port: number, query: string) =>
  new Promise<{ status: number; connection: string | undefined }>((resolve, reject) => {
    request({ host: '127.0.0.1', port, path: `${CALLBACK_PATH}?${query}` }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode!, connection: res.headers.connection }));
    })
      .on('error', reject)
      .end();
  });

const done: CallbackOutcome<string> = { status: 200, title: 'Fertig', message: 'ok', done: { value: 'tokens' } };

describe('the loopback receiver of login', () => {
  it('RFC 6749 §10.12: the redirect that ends the wait settles it; a reload after it gets 410, not a second exchange', async () => {
    let handled = 0;
    const receiver = await listen(async () => (handled++, done));
    expect(await get(receiver.port, 'state=s1')).toEqual({ status: 200, connection: 'close' });
    await expect(receiver.result).resolves.toBe('tokens');
    expect((await get(receiver.port, 'state=s1')).status).toBe(410);
    expect(handled).toBe(1);
  });

  it('close() lets a request in flight get its page instead of a reset connection, then stops listening', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let arrived!: () => void;
    const inFlight = new Promise<void>((resolve) => (arrived = resolve));
    const receiver = await listen(async (url) => {
      if (url.searchParams.get('state') === 'first') return done;
      arrived();
      await held;
      return { status: 400, title: 'Unbekannte Anmeldung', message: 'not ours' };
    });
    const port = receiver.port;
    const reload = get(port, 'state=reload');
    await inFlight;
    await get(port, 'state=first');
    const closing = receiver.close();
    release();
    expect((await reload).status).toBe(400);
    await closing;
    await expect(get(port, 'state=late')).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  });
});
