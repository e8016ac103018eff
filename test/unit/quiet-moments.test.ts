import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { QuietMoments } from '../../src/server/quiet-moments.js';

// Lower bounds only: a quiet moment comes no sooner than its rule says; how much later depends on the machine.
describe('what loads after the ready line waits for a quiet moment', () => {
  let server: Server | undefined;
  afterEach(() => new Promise<void>((done) => (server ? server.close(() => done()) : done())));

  it('counts from the call too: a request answered before it (the warm-up) does not shorten the wait', async () => {
    const quiet = new QuietMoments();
    await sleep(40);
    const called = performance.now();
    await quiet.moment(50);
    expect(performance.now() - called).toBeGreaterThanOrEqual(50);
  });

  it('counts from the last answer: a request answered after the call starts the wait again', async () => {
    server = createServer((_request, response) => void setTimeout(() => response.end('ok'), 30));
    await new Promise<void>((listening) => server!.listen(0, '127.0.0.1', listening));
    const quiet = new QuietMoments();
    quiet.watch(server);
    const moment = quiet.moment(50);
    await sleep(20);
    const { port } = server.address() as AddressInfo;
    // Answered 30 ms after it is sent at the earliest (a timer may fire a fraction of a millisecond early: 1 ms spare).
    const sent = performance.now();
    await new Promise<void>((answered, failed) =>
      request({ port, host: '127.0.0.1' }, (response) => response.resume().on('end', answered))
        .on('error', failed)
        .end(),
    );
    await moment;
    expect(performance.now() - sent).toBeGreaterThanOrEqual(30 + 50 - 1);
  });
});
