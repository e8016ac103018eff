/**
 * Spec 2.7: the supported scopes, in plain German for the person. `label` is short, for lists (the settings page);
 * `description` says what the scope allows and what it does not, for the moment of deciding (the consent page).
 */
export const SCOPES = {
  ask: {
    label: 'Fragen zu Ihren Daten stellen',
    description:
      'Fragen zu Ihrem Arbeitsbereich und Ihrer Wissensdatenbank stellen und die Antworten erhalten. Dabei wird nichts geändert.',
    writes: false,
  },
  'workspace.write': {
    label: 'Arbeitsbereich ändern',
    description: 'Änderungen an Ihrem Arbeitsbereich vorbereiten. Jede einzelne wird erst ausgeführt, wenn Sie sie freigegeben haben.',
    writes: true,
  },
  research: {
    label: 'Recherchen in Auftrag geben',
    description:
      'Recherchen in der Wissensdatenbank durchführen lassen und schriftliche Berichte erhalten. Daten aus Ihrem Arbeitsbereich werden dabei nicht gelesen.',
    writes: false,
  },
  'training.write': {
    label: 'Quellen zur Wissensdatenbank hinzufügen',
    description: 'Neue Quellen in die Wissensdatenbank aufnehmen und später Links zu diesen Quellen abrufen.',
    writes: true,
  },
} as const satisfies Record<string, { label: string; description: string; writes: boolean }>;

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
