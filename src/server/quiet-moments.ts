import type { Server } from 'node:http';
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';

/**
 * When the servers are between requests. What is built after the ready line (the search index) runs in pieces
 * that hold the event loop up, so it waits for a quiet moment: no request in flight and none answered for `ms`. A
 * client's burst right after the start (a test suite, a benchmark) is then served at full speed, and the building
 * fills the gaps after it. A request that needs the index builds it at once instead.
 */
/** A timer this late means the process stood still. */
const STANDSTILL_MS = 250;

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
   * Resolves at the first moment, `ms` or more after this call, with no request in flight and none answered for `ms`,
   * as the process saw it running: a standstill of the whole process (the machine busy elsewhere) is not quiet.
   * Counted from the call as well: the emulator's own warm-up request is answered before the ready line, and the
   * requests a client sends as soon as it reads that line must come before any loading.
   */
  async moment(ms: number): Promise<void> {
    let since = performance.now();
    for (;;) {
      const quietFor = performance.now() - Math.max(this.#lastAnswered, since);
      if (this.#inFlight === 0 && quietFor >= ms) {
        // Looked at again after the loop has polled twice: a request that arrived while the timer was due counts, and
        // so does one that a client in this process sends as it reads an answer it was late to read.
        await nextTurn();
        await nextTurn();
        if (this.#inFlight === 0 && performance.now() - this.#lastAnswered >= ms) return;
        continue;
      }
      const wait = this.#inFlight === 0 ? ms - quietFor : ms;
      const asleep = performance.now();
      await sleep(wait, undefined, { ref: false });
      // A timer due long ago means the process stood still (a busy machine): it saw no moment, quiet or not, so
      // the moment starts again now rather than count the standstill as quiet. (Timers run a little late under any
      // load; only a long standstill counts, or a loaded machine would put the moment off again and again.)
      if (performance.now() - asleep > wait + Math.max(ms, STANDSTILL_MS)) since = performance.now();
    }
  }
}
