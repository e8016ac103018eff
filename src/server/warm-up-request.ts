import { connect } from 'node:net';
import type { FastifyRequest } from 'fastify';
import { randomToken, safeEqual } from '../core/state/crypto.js';

/** How long the emulator waits for its own warm-up request before it goes on without it. */
const WARM_UP_TIMEOUT_MS = 500;

/** The header that marks the emulator's own requests; its value is a secret of this process. */
const WARM_UP_HEADER = 'agent-access-warm-up';

/**
 * The emulator's own first request, sent over a real socket before the ready line: the code every request runs (the
 * socket, the HTTP parser, fastify's routing and hooks, a route and its serializer) is compiled then, not in a
 * client's first request (docs/bench.md "A warm-up request before the ready line, and
 * the MCP SDK on demand"). Such a request is nobody's: no request log, no finding, no fault (`owns`).
 */
export class WarmUpRequests {
  /**
   * Sent with each warm-up request and known to nobody else (it never leaves the process's own socket), so no
   * client can pass for the emulator; unlike the socket's address, it holds for any bind address (a dual-stack `::`
   * sees 127.0.0.1 as ::ffff:127.0.0.1) and for a request the server reads after the warm-up gave up on it.
   */
  readonly #secret = randomToken(16);

  /** Whether `request` is one of the emulator's own. */
  owns(request: FastifyRequest): boolean {
    const mark = request.headers[WARM_UP_HEADER];
    return typeof mark === 'string' && safeEqual(mark, this.#secret);
  }

  /** GETs `path` from the server at `base` and reads the answer to its end; never fails, and waits at most WARM_UP_TIMEOUT_MS. */
  get(base: string, path: string): Promise<void> {
    const url = new URL(path, base);
    return new Promise((resolve) => {
      const socket = connect({ host: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port) });
      socket.setTimeout(WARM_UP_TIMEOUT_MS, () => socket.destroy());
      // Not end() after it: a server that sees the client's end first drops the request. It closes after its answer.
      socket.on('connect', () =>
        socket.write(
          `GET ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\n${WARM_UP_HEADER}: ${this.#secret}\r\nConnection: close\r\n\r\n`,
        ),
      );
      socket.resume();
      socket.on('error', () => undefined);
      socket.on('close', () => resolve());
    });
  }
}
