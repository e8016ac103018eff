import { ClientError } from './errors.js';
import { SUPPORTED_SCOPES, isRetiredScope, splitScope } from './scopes.js';

/**
 * Scopes a client asks for (`login --scope`), checked before any request: spaces or commas between them, at least
 * one, none retired (spec 2.7, 5.9), each one of `supported` (the spec's list unless a server announced its own).
 * Returns them space-separated; throws a usage ClientError of one line that names the valid scopes.
 */
export function checkRequestedScopes(value: string, supported: readonly string[] = SUPPORTED_SCOPES, by = 'the service'): string {
  const scopes = splitScope(value.replace(/[,\s]+/g, ' '));
  const valid = supported.join(', ');
  if (scopes.length === 0) throw new ClientError('usage', `no scope given; name at least one of ${valid}`);
  const retired = scopes.filter(isRetiredScope);
  if (retired.length)
    throw new ClientError(
      'usage',
      `${retired.map((s) => `"${s}"`).join(', ')} ${retired.length > 1 ? 'are' : 'is'} retired and refused by the service; the ask ` +
        `scope covers all reading (use --scope ask)`,
    );
  const unknown = scopes.filter((s) => !supported.includes(s));
  if (unknown.length)
    throw new ClientError(
      'usage',
      `${by} does not know the scope${unknown.length > 1 ? 's' : ''} ${unknown.map((s) => `"${s}"`).join(', ')}; the scopes are ${valid}`,
    );
  return scopes.join(' ');
}
