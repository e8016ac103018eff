/**
 * Loopback names (STANDARDS "Loopback names"): a local client reaches `{base_url}` as 127.0.0.1, localhost or [::1]
 * and compares the protected resource metadata's `resource` with the URL it was given (RFC 9728 §3.3). The resource
 * is named as the client reached it, and its tokens are bound to that name (RFC 8707); the issuer keeps its one name
 * (RFC 8414 §3.3). In this process on a manual clock.
 */
import { describe, expect, it } from 'vitest';
import { protectedResourceMetadata, resourceMetadataUrl } from '../../src/core/metadata.js';
import { isResourceName, nameReached, resourceNames } from '../../src/core/resource-names.js';
import { AUTH_URL, BASE_URL, RESOURCE } from './helpers.js';

const URLS = { baseUrl: BASE_URL, authUrl: AUTH_URL };
const LOCALHOST = 'http://localhost:4100/mcp';
const IPV6 = 'http://[::1]:4100/mcp';

describe('the names of {base_url}/mcp', () => {
  it('STANDARDS "Loopback names": {base_url}/mcp on 127.0.0.1 is also served as localhost and [::1], same scheme, port and path', () => {
    expect([...resourceNames(RESOURCE)]).toEqual([
      ['127.0.0.1:4100', { origin: BASE_URL, resource: RESOURCE }],
      ['localhost:4100', { origin: 'http://localhost:4100', resource: LOCALHOST }],
      ['[::1]:4100', { origin: 'http://[::1]:4100', resource: IPV6 }],
    ]);
  });

  it.each([
    ['another port', 'http://localhost:4101/mcp'],
    ['another path', 'http://localhost:4100/mcp/'],
    ['another scheme', 'https://localhost:4100/mcp'],
    ['another loopback address', 'http://127.0.0.2:4100/mcp'],
    ['a name spelled otherwise', 'http://LOCALHOST:4100/mcp'],
    ['the IPv4-mapped address', 'http://[::ffff:127.0.0.1]:4100/mcp'],
    ['another host', 'http://example.com:4100/mcp'],
  ])('RFC 8707 §2: %s is no name of the resource (exact strings, as before)', (_what, candidate) => {
    expect(isResourceName(RESOURCE, candidate)).toBe(false);
  });

  it('a {base_url} on a host that is no loopback name has only its own name', () => {
    expect([...resourceNames('http://127.0.0.2:4100/mcp').values()].map((n) => n.resource)).toEqual(['http://127.0.0.2:4100/mcp']);
  });

  it.each([
    ['127.0.0.1:4100', RESOURCE],
    ['localhost:4100', LOCALHOST],
    ['LocalHost:4100', LOCALHOST],
    ['[::1]:4100', IPV6],
    ['localhost:4101', RESOURCE],
    ['127.0.0.2:4100', RESOURCE],
    [undefined, RESOURCE],
  ])('RFC 9728 §3.3: a request with Host %s reached %s', (host, resource) => {
    expect(nameReached(RESOURCE, host).resource).toBe(resource);
  });
});

describe('protected resource metadata (RFC 9728)', () => {
  it.each([
    ['localhost:4100', LOCALHOST, 'http://localhost:4100'],
    ['[::1]:4100', IPV6, 'http://[::1]:4100'],
    ['127.0.0.1:4100', RESOURCE, BASE_URL],
  ])(
    'RFC 9728 §3.3: with Host %s, resource is the resource as the client reached it; authorization_servers stays the one issuer (RFC 8414 §3.3)',
    (host, resource, origin) => {
      expect(protectedResourceMetadata(URLS, host)).toMatchObject({ resource, authorization_servers: [BASE_URL] });
      expect(resourceMetadataUrl(URLS, host)).toBe(`${origin}/.well-known/oauth-protected-resource/mcp`);
    },
  );

  it('without a Host (or with another), the metadata is what it always was', () => {
    expect(protectedResourceMetadata(URLS)).toEqual(protectedResourceMetadata(URLS, 'attacker.example'));
    expect(protectedResourceMetadata(URLS).resource).toBe(RESOURCE);
    expect(resourceMetadataUrl(URLS)).toBe(`${BASE_URL}/.well-known/oauth-protected-resource/mcp`);
  });
});
