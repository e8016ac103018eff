import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { PROBLEM_TYPE_PREFIX, PROBLEMS } from '../protocol/problems.js';

/**
 * The limits of the HTTP transport, the same on both origins (docs/serve.md "Endpoints", **Limits**). Body limits are
 * per route (`bodyLimit` in `newFastify`, the REST JSON parser in rest-routes.ts).
 */
export const HTTP_LIMITS = {
  /**
   * The request target (path and query) in bytes; longer → 414. RFC 9110 §4.1 recommends at least 8000 octets
   * (https://www.rfc-editor.org/rfc/rfc9110#section-4.1).
   */
  target: 8 * 1024,
  /** The header fields, names and values with their separators; more → 431 (RFC 6585 §5). */
  headers: 16 * 1024,
  /**
   * What Node's parser takes of a request's head at all (its `maxHeaderSize`, Node's default): the target, header names
   * and values, without separators. Within it the two limits above are checked with the route known, so the answer has
   * the route's error shape; beyond it no route is known and the 431 is a problem. Each connection buffers at most this
   * much of a head, so many connections that never end their head cost little memory.
   */
  head: 16 * 1024,
  /** A request's head must have arrived this long after it began, else 408 and the connection closes (slow heads). */
  headersTimeoutMs: 10_000,
  /**
   * The whole request, body included, must have arrived this long after it began, else 408 and the connection closes:
   * a connection counts as busy once its head is in, so bodies that never come would otherwise hold every slot.
   */
  requestTimeoutMs: 20_000,
  /** How often Node looks for heads and requests past their timeouts. */
  timeoutCheckMs: 1_000,
  /** A keep-alive connection with no request is closed after this long (Node's default; fastify's is 72 s). */
  keepAliveMs: 5_000,
  /**
   * Open connections of all the emulator's listeners together. At the bound the oldest connection with no request in
   * flight is closed for the new one; when every one has a request in flight, the new one gets 503. Below the soft
   * limit of file descriptors common on desktops (1024), with room for the state files and the process's own.
   */
  connections: 512,
  /** A body left unread by an early answer that Node reads and discards, keeping the connection; more closes it. */
  drain: 1024 * 1024,
  /** After an early answer the connection is read and discarded for at most this long (RFC 9112 §9.6)... */
  lingerMs: 30_000,
  /** ...and closed sooner when the client sends nothing for this long. */
  lingerIdleMs: 5_000,
} as const;

/** The error codes of a request target or header fields over the limits (/mcp answers them in JSON-RPC's shape). */
export const URI_TOO_LONG = 'AA_ERR_URI_TOO_LONG';
export const HEADERS_TOO_LARGE = 'AA_ERR_HEADERS_TOO_LARGE';

/** An answer about the request's size on the wire, given with its status in the route's error shape. */
class TransportRefusal extends Error {
  readonly code: string;
  constructor(
    readonly statusCode: 414 | 431,
    message: string,
  ) {
    super(message);
    this.code = statusCode === 414 ? URI_TOO_LONG : HEADERS_TOO_LARGE;
  }
}

/**
 * RFC 9110 §15.5.15 (414), RFC 6585 §5 (431): a request target or header fields over the limits, found once the route
 * is known (https://www.rfc-editor.org/rfc/rfc9110#section-15.5.15, https://www.rfc-editor.org/rfc/rfc6585#section-5).
 */
export function checkRequestHead(request: FastifyRequest): Error | undefined {
  const target = request.raw.url ?? '';
  if (target.length > HTTP_LIMITS.target)
    return new TransportRefusal(414, `the request target is ${target.length} bytes; at most ${HTTP_LIMITS.target} are accepted`);
  const raw = request.raw.rawHeaders;
  // Each field is `name: value` and CRLF.
  let size = 0;
  for (let i = 0; i < raw.length; i += 2) size += raw[i]!.length + raw[i + 1]!.length + 4;
  if (size > HTTP_LIMITS.headers)
    return new TransportRefusal(431, `the header fields are ${size} bytes; at most ${HTTP_LIMITS.headers} are accepted`);
  return undefined;
}

const lingering = new WeakSet<Socket>();
/** Connections whose answer went out before the request was read: their close lingers (closeUnreadRequest). */
const closing = new WeakSet<Socket>();

/**
 * RFC 9112 §9.6 (https://www.rfc-editor.org/rfc/rfc9112#section-9.6): close in stages. Closing a socket while the
 * client is still sending makes the kernel answer with a reset, which can erase the answer from the client's buffers
 * before it is read (the EPIPE/ECONNRESET instead of a 413). So: half-close after the answer, read and discard what
 * still arrives until the client closes, it stays silent for `lingerIdleMs`, or `lingerMs` passed; then close.
 */
function lingeringClose(socket: Socket): void {
  if (lingering.has(socket) || socket.destroyed) return;
  lingering.add(socket);
  socket.end();
  // The client closed its side: nothing is left unread once our answer is out.
  socket.once('end', () => (socket.writableFinished ? socket.destroy() : socket.once('finish', () => socket.destroy())));
  let seen = socket.bytesRead;
  let waited = 0;
  const timer = setInterval(() => {
    waited += HTTP_LIMITS.lingerIdleMs;
    if (socket.bytesRead === seen || waited >= HTTP_LIMITS.lingerMs) socket.destroy();
    seen = socket.bytesRead;
  }, HTTP_LIMITS.lingerIdleMs).unref();
  socket.once('close', () => clearInterval(timer));
  // Whatever the parser still takes is discarded, and the socket keeps being read.
  socket.resume();
}

/**
 * An answer that goes out before the request's body was read (a body over the limit, a refusal before the body, an
 * unknown route or method). A declared rest of at most `drain` bytes is read and discarded by Node, and the connection
 * stays open. Otherwise (a body of unknown length, a larger one, or an answer that closes anyway, as fastify's after a
 * body error) the connection ends: `Connection: close`, then the lingering close above, so the client reads the answer
 * whatever it still sends. Node ends a connection whose answer said close with `destroySoon()`, which closes at once;
 * this connection lingers instead.
 */
export function closeUnreadRequest(request: FastifyRequest, reply: FastifyReply): void {
  // A request without a body has nothing left to read (its `complete` may not be set yet while routes answer at once).
  const { headers } = request;
  const chunked = headers['transfer-encoding'] !== undefined;
  const length = Number(headers['content-length'] ?? 0);
  if ((!chunked && !(length > 0)) || request.raw.complete) return;
  const closes = String(reply.getHeader('connection') ?? '').toLowerCase() === 'close';
  if (!closes && !chunked && length <= HTTP_LIMITS.drain) return;
  const socket = request.raw.socket;
  reply.header('connection', 'close');
  closing.add(socket);
  socket.destroySoon = () => lingeringClose(socket);
  // The rest of the body is read and dropped, not left to stall the socket.
  request.raw.resume();
}

/** The answers Node's own handler gives to what its parser refuses, by the error's code. */
const STATUS_OF_PARSER_ERROR: Partial<Record<string, number>> = {
  HPE_HEADER_OVERFLOW: 431,
  HPE_CHUNK_EXTENSIONS_OVERFLOW: 413,
  ERR_HTTP_REQUEST_TIMEOUT: 408,
};

function describeParserError(code: string | undefined, status: number): string {
  if (status === 431) return `the request line and header fields exceed ${HTTP_LIMITS.head} bytes together`;
  if (status === 413) return 'the chunk extensions of the body are too large';
  if (status === 408) return 'the request did not arrive in time';
  return `the request is not valid HTTP/1.1 (${code ?? 'parse error'})`;
}

/**
 * Requests Node's parser refuses before any route runs (a head over `HTTP_LIMITS.head`, broken framing): Node's own
 * answer, as a problem, then the lingering close instead of an immediate one. The parser stays in its error state, so
 * every further chunk reports the error again; the connection is answered once.
 */
export function answerClientError(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  if (lingering.has(socket) || closing.has(socket)) return;
  // As Node's own handler: no answer into one that is already being written.
  const inFlight = (socket as Socket & { _httpMessage?: { headersSent: boolean } })._httpMessage;
  if (socket.writable && !inFlight?.headersSent) {
    const status = STATUS_OF_PARSER_ERROR[error.code ?? ''] ?? 400;
    const code = status === 413 ? 'body_too_large' : 'invalid_request';
    const body = JSON.stringify({
      type: `${PROBLEM_TYPE_PREFIX}${code}`,
      title: PROBLEMS[code].title,
      status,
      detail: describeParserError(error.code, status),
    });
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_TEXT[status] ?? 'Bad Request'}\r\n` +
        'Content-Type: application/problem+json; charset=utf-8\r\nCache-Control: no-store\r\nConnection: close\r\n' +
        `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
  }
  lingeringClose(socket);
}

const STATUS_TEXT: Partial<Record<number, string>> = {
  400: 'Bad Request',
  408: 'Request Timeout',
  413: 'Content Too Large',
  431: 'Request Header Fields Too Large',
};

/**
 * The one bound on open connections of every listener of an emulator (`HTTP_LIMITS.connections`). A file descriptor
 * is spent on each: idle keep-alive connections and heads that never end must not lock out the next client. So, at
 * the bound, the oldest connection without a request in flight (idle, or its head not complete) is closed to make
 * room; a request being answered is never cut. Only when all of them are busy is the new connection refused, with a
 * 503 it can read.
 */
export class ConnectionBudget {
  /** Open connections in the order they came, with the number of their requests in flight. */
  readonly #open = new Map<Socket, number>();

  /** The answer to a connection over the bound (as an injected 503: the service's `server_error` problem). */
  readonly #busy: string;

  constructor(readonly max: number = HTTP_LIMITS.connections) {
    if (!Number.isSafeInteger(max) || max < 1) throw new Error(`maxConnections ${max} is not a whole number of at least 1`);
    this.#busy = JSON.stringify({
      type: `${PROBLEM_TYPE_PREFIX}server_error`,
      title: PROBLEMS.server_error.title,
      status: 503,
      detail: `all ${max} connections the emulator keeps open have a request in flight; retry in a moment`,
    });
  }

  get size(): number {
    return this.#open.size;
  }

  /** Counts the server's connections against this budget (listeners sharing it share the bound). */
  watch(server: Server): void {
    server.on('connection', (socket: Socket) => this.#admit(socket));
    server.on('request', (request: { socket: Socket }, response: { once(event: 'close', listener: () => void): unknown }) => {
      const socket = request.socket;
      const inFlight = this.#open.get(socket);
      if (inFlight === undefined) return;
      this.#open.set(socket, inFlight + 1);
      response.once('close', () => {
        const now = this.#open.get(socket);
        if (now !== undefined) this.#open.set(socket, now - 1);
      });
    });
  }

  #admit(socket: Socket): void {
    if (this.#open.size >= this.max && !this.#evictIdle()) {
      socket.end(
        'HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nConnection: close\r\nContent-Type: application/problem+json; charset=utf-8\r\n' +
          `Content-Length: ${Buffer.byteLength(this.#busy)}\r\n\r\n${this.#busy}`,
        () => socket.destroy(),
      );
      return;
    }
    this.#open.set(socket, 0);
    socket.once('close', () => this.#open.delete(socket));
  }

  /** Closes the oldest connection with no request in flight; false when there is none. */
  #evictIdle(): boolean {
    for (const [socket, inFlight] of this.#open) {
      if (inFlight > 0) continue;
      this.#open.delete(socket);
      socket.destroy();
      return true;
    }
    return false;
  }
}
