import { connect } from 'node:net';

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
  json: () => any;
}

export interface RawExchange {
  /** The first response on the connection, or undefined when none arrived complete. */
  response: RawResponse | undefined;
  /** Every complete response, in order (pipelined requests). */
  responses: RawResponse[];
  /** The socket error the client met (EPIPE, ECONNRESET), if any. */
  error: string | undefined;
  /** Bytes of the body written before the client stopped. */
  sent: number;
}

/** Complete responses at the start of `data` (Content-Length framing: every answer of this service has one). */
function parseResponses(data: Buffer): RawResponse[] {
  const responses: RawResponse[] = [];
  let offset = 0;
  for (;;) {
    const end = data.indexOf('\r\n\r\n', offset);
    if (end < 0) return responses;
    const [statusLine, ...lines] = data.subarray(offset, end).toString('latin1').split('\r\n');
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const length = Number(headers['content-length'] ?? 0);
    if (data.length < end + 4 + length) return responses;
    const body = data.subarray(end + 4, end + 4 + length).toString('utf8');
    responses.push({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine ?? '')?.[1]), headers, body, json: () => JSON.parse(body) });
    offset = end + 4 + length;
  }
}

/**
 * A client on a raw socket: writes `head`, then `body` in chunks as fast as the socket takes them, and reads what comes
 * back until the server closes. The client keeps its side open when the server half-closes (`allowHalfOpen`), as a
 * client that does not look at what arrives while it sends: only a server that reads until the client is done
 * spares it the reset. `readAfterSending` leaves the answer unread in the kernel until the body is sent (a client that
 * reads only then); `stopOnAnswer` stops sending once a complete answer arrived (as curl does); `expect` is the number
 * of responses after which the client closes (pipelined requests on a connection the server keeps).
 */
export function rawExchange(
  url: string,
  head: string,
  body: Buffer = Buffer.alloc(0),
  options: { chunk?: number; readAfterSending?: boolean; stopOnAnswer?: boolean; expect?: number } = {},
): Promise<RawExchange> {
  const { chunk = 64 * 1024, readAfterSending = false, stopOnAnswer = false, expect } = options;
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect({ host: hostname, port: Number(port), allowHalfOpen: true });
    const received: Buffer[] = [];
    let error: string | undefined;
    let sent = 0;
    let answered = false;
    socket.on('data', (data: Buffer) => {
      received.push(data);
      const count = parseResponses(Buffer.concat(received)).length;
      answered = count > 0;
      if (expect !== undefined && count >= expect) socket.end();
    });
    if (readAfterSending) socket.pause();
    socket.on('error', (e: NodeJS.ErrnoException) => (error ??= e.code ?? e.message));
    socket.on('close', () => {
      const responses = parseResponses(Buffer.concat(received));
      resolve({ response: responses[0], responses, error, sent });
    });
    socket.on('connect', () => {
      socket.write(head);
      const next = () => {
        while (sent < body.length) {
          if (stopOnAnswer && answered) break;
          const part = body.subarray(sent, sent + chunk);
          sent += part.length;
          if (!socket.write(part)) return void socket.once('drain', next);
        }
        if (expect === undefined) socket.end();
        if (readAfterSending) socket.resume();
      };
      next();
    });
  });
}

/** `body` in HTTP/1.1 chunked transfer coding (RFC 9112 §7.1), 64 KiB a chunk. */
export function chunked(body: Buffer): Buffer {
  const parts: Buffer[] = [];
  for (let offset = 0; offset < body.length; offset += 64 * 1024) {
    const part = body.subarray(offset, offset + 64 * 1024);
    parts.push(Buffer.from(`${part.length.toString(16)}\r\n`), part, Buffer.from('\r\n'));
  }
  parts.push(Buffer.from('0\r\n\r\n'));
  return Buffer.concat(parts);
}

/** The request line and headers of one request; `Content-Length` from `body` unless the headers frame it otherwise. */
export function requestHead(method: string, url: string, headers: Record<string, string>, body?: Buffer): string {
  const { host, pathname, search } = new URL(url);
  const all: Record<string, string> = { host, ...headers };
  if (body && all['transfer-encoding'] === undefined) all['content-length'] = String(body.length);
  return `${method} ${pathname}${search} HTTP/1.1\r\n${Object.entries(all)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('')}\r\n`;
}
