import { connect } from 'node:net';
import type { FastifyRequest } from 'fastify';

/** How long the emulator waits for its own warm-up request before it goes on without it. */
const WARM_UP_TIMEOUT_MS = 500;

/**
 * The emulator's own first request, sent over a real socket before the ready line: the code every request runs (the
 * socket, the HTTP parser, fastify's routing and hooks, a route and its serializer) is compiled then, not in a
 * client's first request (a client's first metadata request: about 9 ms before, 3 ms after, on a new connection
 * either way). Such a request is nobody's: no request log, no finding, no fault (`owns`).
 */
export class WarmUpRequests {
  /** The address and port each warm-up socket sends from: how the servers tell its requests apart. */
  readonly #from = new Set<string>();

  /** Whether `request` is one of the emulator's own. Another client cannot send from a socket the emulator holds. */
  owns(request: FastifyRequest): boolean {
    return this.#from.size > 0 && this.#from.has(`${request.socket.remoteAddress}|${request.socket.remotePort}`);
  }

  /** GETs `path` from the server at `base` and reads the answer to its end; never fails, and waits at most WARM_UP_TIMEOUT_MS. */
  get(base: string, path: string): Promise<void> {
    const url = new URL(path, base);
    return new Promise((resolve) => {
      let from: string | undefined;
      const socket = connect({ host: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port) });
      socket.setTimeout(WARM_UP_TIMEOUT_MS, () => socket.destroy());
      socket.on('connect', () => {
        from = `${socket.localAddress}|${socket.localPort}`;
        this.#from.add(from);
        // Not end(): a server that sees the client's end first drops the request. It closes after its answer.
        socket.write(`GET ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nConnection: close\r\n\r\n`);
      });
      socket.resume();
      socket.on('error', () => undefined);
      socket.on('close', () => {
        if (from !== undefined) this.#from.delete(from);
        resolve();
      });
    });
  }
}
