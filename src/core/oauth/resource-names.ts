import { isLoopbackHost } from '../../protocol/loopback.js';

/**
 * The loopback names a local client may reach the service by (STANDARDS "Loopback names"): `127.0.0.1`,
 * `localhost` and `[::1]`, as `URL.host` writes them.
 */
export const LOOPBACK_NAMES = ['127.0.0.1', 'localhost', '[::1]'] as const;

/** One name of the resource: the origin a client reached and the resource `{origin}/mcp` there. */
export interface ResourceName {
  readonly origin: string;
  readonly resource: string;
}

/** The names of the last resource asked about: the guard looks one up on every request. */
let memo: { resource: string; byHost: ReadonlyMap<string, ResourceName> } | undefined;

/**
 * The names of the one protected resource `{base_url}/mcp` (`resource`), keyed by the `Host` header that reaches
 * each (`localhost:4100`): the resource itself first, then, when its host is a loopback name, the same URL (scheme,
 * port, path) with each other loopback name as host. A client compares the protected resource metadata's `resource`
 * with the URL it was given (RFC 9728 §3.3, https://www.rfc-editor.org/rfc/rfc9728#section-3.3), so each name is a
 * resource of its own for metadata, authorization and the token's audience (RFC 8707); the issuer keeps its one
 * name (RFC 8414 §3.3).
 */
export function resourceNames(resource: string): ReadonlyMap<string, ResourceName> {
  if (memo?.resource === resource) return memo.byHost;
  const url = new URL(resource);
  const byHost = new Map<string, ResourceName>([[url.host, { origin: `${url.protocol}//${url.host}`, resource }]]);
  if (isLoopbackHost(url.hostname)) {
    for (const name of LOOPBACK_NAMES) {
      const host = url.port ? `${name}:${url.port}` : name;
      if (!byHost.has(host)) byHost.set(host, { origin: `${url.protocol}//${host}`, resource: `${url.protocol}//${host}${url.pathname}` });
    }
  }
  memo = { resource, byHost };
  return byHost;
}

/** True when `candidate` is, byte for byte, one of the names of `resource` (see `resourceNames`). */
export function isResourceName(resource: string, candidate: string): boolean {
  for (const name of resourceNames(resource).values()) if (name.resource === candidate) return true;
  return false;
}

/**
 * The name of `resource` a request reached, from its `Host` header (case-insensitive, RFC 9110 §7.2); the resource
 * itself for any other Host (or none). The host guard (server/host-guard.ts) has already refused foreign names.
 */
export function nameReached(resource: string, host: string | undefined): ResourceName {
  const byHost = resourceNames(resource);
  return (host !== undefined && byHost.get(host.toLowerCase())) || (byHost.values().next().value as ResourceName);
}

/** The port-independent form a grant stores a name in: its port as `{port}` (ports may change between runs). */
const portless = (url: URL, host: string): string => `${url.protocol}//${host}${url.port ? ':{port}' : ''}${url.pathname}`;

/**
 * What a grant stores as its resource (state.ts `Grant.resource`) when the client asked for `requested`, one of the
 * names of `resource`: the resource itself unchanged, as it always was; another loopback name in a port-independent
 * form, `http://localhost:{port}/mcp`.
 */
export function storedResourceName(resource: string, requested: string): string {
  return requested === resource ? requested : portless(new URL(resource), new URL(requested).hostname);
}

/**
 * The resource a grant was given for, as a name of `resource` at the service's current address: the loopback name
 * `storedResourceName` recorded, at the current port. Any other stored value (an absolute `{base_url}/mcp` of an
 * earlier run, the fixtures' `{base_url}/mcp`, what older versions wrote) means the resource itself.
 */
export function grantedResourceName(resource: string, stored: string): string {
  if (stored === resource) return resource;
  const url = new URL(resource);
  const name = LOOPBACK_NAMES.find((n) => stored === portless(url, n));
  return (name && resourceNames(resource).get(url.port ? `${name}:${url.port}` : name)?.resource) || resource;
}
