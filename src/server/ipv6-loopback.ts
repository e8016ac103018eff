import { createServer, type Server, type ServerOptions } from 'node:http';
import type { FastifyInstance } from 'fastify';

/**
 * A second listener for an app that listens on 127.0.0.1: the same port on ::1, so that `http://[::1]:P` reaches it,
 * and so does `http://localhost:P` where localhost resolves to ::1 first (STANDARDS "Loopback names"). fastify binds
 * more than one address only for the host "localhost", and then only those the resolver returns (127.0.0.1 alone on
 * many machines), so this is what fastify's own extra bindings are: a plain HTTP server whose requests the app's
 * router handles (`app.routing`), with the main server's parser options, timeouts and client-error handler.
 */
export function listenOnIpv6Loopback(app: FastifyInstance, port: number): Promise<Server> {
  const main = app.server;
  // The parser's options as the app's server got them (fastify's `http` option; Node keeps them on the server):
  // the same limits on both addresses, the request head's size among them.
  const {
    maxHeaderSize,
    insecureHTTPParser,
    requireHostHeader,
    joinDuplicateHeaders,
    rejectNonStandardBodyWrites,
    connectionsCheckingInterval,
  } = main as unknown as ServerOptions;
  const twin = createServer(
    {
      maxHeaderSize,
      insecureHTTPParser,
      requireHostHeader,
      joinDuplicateHeaders,
      rejectNonStandardBodyWrites,
      connectionsCheckingInterval,
      headersTimeout: main.headersTimeout,
    },
    (request, response) => app.routing(request, response),
  );
  twin.keepAliveTimeout = main.keepAliveTimeout;
  twin.headersTimeout = main.headersTimeout;
  twin.requestTimeout = main.requestTimeout;
  twin.timeout = main.timeout;
  twin.maxRequestsPerSocket = main.maxRequestsPerSocket;
  for (const listener of main.listeners('clientError')) twin.on('clientError', listener as (...args: unknown[]) => void);
  return new Promise((resolve, reject) => {
    twin.once('error', reject);
    twin.listen({ port, host: '::1' }, () => {
      twin.off('error', reject);
      resolve(twin);
    });
  });
}

/** Stops accepting and resolves once the connections still open (a request in flight) have ended. */
export const closeServer = (server: Server): Promise<void> =>
  new Promise((resolve) => {
    if (!server.listening) return resolve();
    server.close(() => resolve());
  });

/** Errors that mean this machine has no ::1 to listen on (IPv6 off or absent). */
const NO_IPV6 = new Set(['EADDRNOTAVAIL', 'EAFNOSUPPORT', 'EPROTONOSUPPORT']);

/**
 * Every app on ::1 too, at its port (`listenOnIpv6Loopback`). Where that fails the app stays on 127.0.0.1 alone, and
 * `notice` says so in one line for all of them.
 */
export async function alsoOnIpv6Loopback(apps: ReadonlyArray<{ app: FastifyInstance; port: number }>): Promise<{
  servers: Server[];
  notice?: string;
}> {
  const results = await Promise.allSettled(apps.map(({ app, port }) => listenOnIpv6Loopback(app, port)));
  const servers = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const failed = results.flatMap((r, i) =>
    r.status === 'rejected' ? [{ port: apps[i]!.port, code: (r.reason as { code?: string }).code ?? String(r.reason) }] : [],
  );
  if (failed.length === 0) return { servers };
  const where = failed.map((f) => `[::1]:${f.port}`).join(' and ');
  if (failed.every((f) => NO_IPV6.has(f.code)))
    return {
      servers,
      notice:
        `::1 is not available on this machine (${failed[0]!.code}): listening on 127.0.0.1 only, so the emulator cannot be ` +
        `reached at ${where}, nor at localhost where it resolves to ::1 first; use 127.0.0.1`,
    };
  return {
    servers,
    notice:
      `could not also listen on ${where} (${failed.map((f) => f.code).join(', ')}): listening on 127.0.0.1 only ` +
      `there, so ${where}, and localhost where it resolves to ::1 first, may reach another program; use 127.0.0.1`,
  };
}
