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
