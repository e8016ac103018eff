/**
 * DNS-rebinding protection for a loopback server: the Host header must name a loopback address with the
 * server's port. Pure, so the rule is tested without a server.
 */
export function isAllowedHost(hostHeader: string | undefined, port: number, bindHost?: string): boolean {
  if (!hostHeader) return false;
  const names = ['127.0.0.1', 'localhost', '[::1]'];
  if (bindHost && !names.includes(bindHost)) names.push(bindHost.includes(':') ? `[${bindHost}]` : bindHost);
  return names.some((name) => hostHeader.toLowerCase() === `${name}:${port}`);
}

export const isLoopbackAddress = (address: string | undefined): boolean =>
  !!address && (address === '::1' || address.startsWith('127.') || address.startsWith('::ffff:127.'));

export const isLoopbackBind = (host: string): boolean => host === 'localhost' || host === '::1' || host.startsWith('127.');
