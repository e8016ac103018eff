/**
 * DNS-rebinding protection for a loopback server: the Host header must name a loopback address with the
 * server's port. Pure, so the rule is tested without a server.
 */
export function isAllowedHost(hostHeader: string | undefined, port: number): boolean {
  if (!hostHeader) return false;
  const allowed = [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`];
  return allowed.includes(hostHeader.toLowerCase());
}

export const isLoopbackAddress = (address: string | undefined): boolean =>
  !!address && (address === '::1' || address.startsWith('127.') || address.startsWith('::ffff:127.'));

export const isLoopbackBind = (host: string): boolean => host === 'localhost' || host === '::1' || host.startsWith('127.');
