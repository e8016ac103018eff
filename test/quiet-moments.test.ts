import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { QuietMoments } from '../src/server/quiet-moments.js';

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

  it('a standstill of the process is not a quiet moment: the wait starts again when the loop runs again', async () => {
    const quiet = new QuietMoments();
    const moment = quiet.moment(50);
    await sleep(10);
    // The whole process stands still past the moment's time, as on a busy machine; its timer is due when it resumes.
    const stood = performance.now();
    while (performance.now() - stood < 400);
    const resumed = performance.now();
    await moment;
    expect(performance.now() - resumed).toBeGreaterThanOrEqual(50);
  });

  it('counts from the last answer: a request answered after the call starts the wait again', async () => {
    // The request is in flight before the call, so the server has seen it whatever the machine's load: a request
    // sent after the call may reach the server only once a quiet moment has already come, which proves nothing.
    let arrived!: () => void;
    const inFlight = new Promise<void>((resolve) => (arrived = resolve));
    let answeredAt = 0;
    server = createServer((_request, response) => {
      arrived();
      setTimeout(() => {
        answeredAt = performance.now();
        response.end('ok');
      }, 30);
    });
    await new Promise<void>((listening) => server!.listen(0, '127.0.0.1', listening));
    const quiet = new QuietMoments();
    quiet.watch(server);
    const { port } = server.address() as AddressInfo;
    const answered = new Promise<void>((resolve, failed) =>
      request({ port, host: '127.0.0.1' }, (response) => response.resume().on('end', resolve))
        .on('error', failed)
        .end(),
    );
    await inFlight;
    const called = performance.now();
    await quiet.moment(50);
    await answered;
    expect(answeredAt).toBeGreaterThan(called);
    // The answer is marked when its socket write closes, after end(): the wait runs at least 50 ms from end().
    expect(performance.now() - answeredAt).toBeGreaterThanOrEqual(50);
  });
});
