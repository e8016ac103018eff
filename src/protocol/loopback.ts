const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost']);

/**
 * The host names of a loopback URL (as `URL.hostname` gives them): where plain http is allowed, and where a
 * redirect URI may change its port (RFC 8252 §7.3, https://www.rfc-editor.org/rfc/rfc8252#section-7.3).
 */
export const isLoopbackHost = (hostname: string): boolean => LOOPBACK_HOSTS.has(hostname);
