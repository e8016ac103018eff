import type { Server } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * When the servers are between requests. What is built after the ready line (the search index) runs in pieces
 * that hold the event loop up, so it waits for a quiet moment: no request in flight and none answered for `ms`. A
 * client's burst right after the start (a test suite, a benchmark) is then served at full speed, and the building
 * fills the gaps after it. A request that needs the index builds it at once instead.
 */
export class QuietMoments {
  #inFlight = 0;
  /** None yet: a moment also counts from when it is asked for. */
  #lastAnswered = -Infinity;

  /** Counts the requests of this server (the raw Node server: the ::1 twins too). */
  watch(server: Server): void {
    server.on('request', (_request, response) => {
      this.#inFlight++;
      response.once('close', () => {
        this.#inFlight--;
        this.#lastAnswered = performance.now();
      });
    });
  }

  /**
   * Resolves at the first moment, `ms` or more after this call, with no request in flight and none answered for `ms`.
   * Counted from the call as well: the emulator's own warm-up request is answered before the ready line, and the
   * requests a client sends as soon as it reads that line must come before any loading.
   */
  async moment(ms: number): Promise<void> {
    const since = performance.now();
    for (;;) {
      const quietFor = performance.now() - Math.max(this.#lastAnswered, since);
      if (this.#inFlight === 0 && quietFor >= ms) return;
      await sleep(this.#inFlight === 0 ? ms - quietFor : ms, undefined, { ref: false });
    }
  }
}
