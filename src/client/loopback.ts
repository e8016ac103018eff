import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { html, page } from '../protocol/html.js';

export const CALLBACK_PATH = '/callback';
/** How long close() lets the requests in flight finish. */
const CLOSE_GRACE_MS = 2_000;

/** What the redirect handler decides: the page the person sees, and whether the wait is over. */
export interface CallbackOutcome<T> {
  status: number;
  title: string;
  message: string;
  /** Set when this request ends the wait (success or a final error); unset keeps listening (e.g. a stale tab). */
  done?: { value: T } | { error: Error };
}

/**
 * The redirect target of a native app (RFC 8252 §7.3): an HTTP listener on 127.0.0.1 and a free port that
 * takes the one redirect meant for it, shows the person a page they may close, and is closed afterwards.
 */
export class LoopbackReceiver<T> {
  readonly #server: Server;
  #settle!: { resolve: (v: T) => void; reject: (e: Error) => void };
  readonly result: Promise<T>;

  private constructor(handle: (url: URL) => Promise<CallbackOutcome<T>>) {
    this.result = new Promise<T>((resolve, reject) => (this.#settle = { resolve, reject }));
    this.result.catch(() => undefined); // observed by the caller; never an unhandled rejection
    let finished = false;
    this.#server = createServer((req: IncomingMessage, res: ServerResponse) => {
      let url: URL;
      try {
        url = new URL(req.url ?? '/', 'http://127.0.0.1');
      } catch {
        res.writeHead(400, { 'content-type': 'text/plain; charset=utf-8' }).end('bad request\n');
        return;
      }
      if (req.method !== 'GET' || url.pathname !== CALLBACK_PATH) {
        res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('not found\n');
        return;
      }
      if (finished) {
        send(res, {
          status: 410,
          title: 'Bereits abgeschlossen',
          message: 'Diese Anmeldung ist schon abgeschlossen. Sie können diesen Tab schließen.',
        });
        return;
      }
      // The base is fixed: the Host header is the sender's to choose and must not decide anything (or throw).
      handle(url).then(
        (outcome) => {
          if (outcome.done && !finished) {
            finished = true;
            if ('value' in outcome.done) this.#settle.resolve(outcome.done.value);
            else this.#settle.reject(outcome.done.error);
          }
          send(res, outcome);
        },
        (error: Error) => {
          finished = true;
          this.#settle.reject(error);
          send(res, { status: 500, title: 'Fehler', message: `Die Anmeldung ist fehlgeschlagen: ${error.message}` });
        },
      );
    });
  }

  /** Listens on 127.0.0.1 (port 0: a free one). */
  static async listen<T>(port: number, handle: (url: URL) => Promise<CallbackOutcome<T>>): Promise<LoopbackReceiver<T>> {
    const receiver = new LoopbackReceiver<T>(handle);
    await new Promise<void>((resolve, reject) => {
      receiver.#server.once('error', reject);
      receiver.#server.listen(port, '127.0.0.1', () => resolve());
    });
    return receiver;
  }

  get port(): number {
    return (this.#server.address() as AddressInfo).port;
  }

  /** Ends the wait from outside (timeout, Ctrl-C). */
  abort(error: Error): void {
    this.#settle.reject(error);
  }

  /**
   * Stops listening and drops idle connections (server.close() does both). A request in flight (a reload of the tab
   * just as the login ended) still gets its page rather than a reset connection; after CLOSE_GRACE_MS none holds the
   * command up any longer.
   */
  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    const grace = setTimeout(() => this.#server.closeAllConnections(), CLOSE_GRACE_MS);
    await closed;
    clearTimeout(grace);
  }
}

function send(res: ServerResponse, outcome: { status: number; title: string; message: string }): void {
  res.writeHead(outcome.status, {
    'content-type': 'text/html; charset=utf-8',
    'cache-control': 'no-store',
    'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'",
    'referrer-policy': 'no-referrer',
    'x-content-type-options': 'nosniff',
    // One redirect per login: a kept-alive connection would only hold up close().
    connection: 'close',
  });
  res.end(page(`${outcome.title} · agent-access`, html`<h1>${outcome.title}</h1><p role="status">${outcome.message}</p>`));
}
