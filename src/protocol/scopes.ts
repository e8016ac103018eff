import { ClientError } from './errors.js';

/** Spec 2.7: the supported scopes, labelled in plain German for the consent screen. */
export const SCOPES = {
  ask: {
    label: 'Fragen zu Ihrem Arbeitsbereich und Ihrer Wissensdatenbank stellen (nur lesen)',
    writes: false,
  },
  'workspace.write': {
    label: 'Ihren Arbeitsbereich ändern, jede einzelne Aktion erst nach Ihrer Freigabe',
    writes: true,
  },
  research: {
    label:
      'Recherchen in der Wissensdatenbank durchführen und schriftliche Berichte erhalten (kostet AKh, liest keine Arbeitsbereichsdaten)',
    writes: false,
  },
  'training.write': {
    label: 'Quellen zur Wissensdatenbank hinzufügen und erneut darauf verlinken',
    writes: true,
  },
} as const satisfies Record<string, { label: string; writes: boolean }>;

export type Scope = keyof typeof SCOPES;
export const SUPPORTED_SCOPES = Object.keys(SCOPES) as Scope[];

/** Spec 2.7 and 9: refused when requested; dropped from old grants at their next refresh. */
export const RETIRED_SCOPES = [
  'documents.read',
  'contacts.read',
  'places.read',
  'work_items.read',
  'listings.read',
  'animals.read',
  'letters.read',
] as const;

export const isSupportedScope = (s: string): s is Scope => Object.hasOwn(SCOPES, s);
export const isRetiredScope = (s: string): boolean => (RETIRED_SCOPES as readonly string[]).includes(s);

/** Splits a space-separated scope string (RFC 6749 §3.3, https://www.rfc-editor.org/rfc/rfc6749#section-3.3), dropping duplicates, keeping order. */
export function splitScope(value: string): string[] {
  return [...new Set(value.split(' ').filter((s) => s.length > 0))];
}

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
      `${retired.map((s) => `"${s}"`).join(', ')} ${retired.length > 1 ? 'are' : 'is'} retired and refused by the service; the ask scope covers all reading (use --scope ask)`,
    );
  const unknown = scopes.filter((s) => !supported.includes(s));
  if (unknown.length)
    throw new ClientError(
      'usage',
      `${by} does not know the scope${unknown.length > 1 ? 's' : ''} ${unknown.map((s) => `"${s}"`).join(', ')}; the scopes are ${valid}`,
    );
  return scopes.join(' ');
}
