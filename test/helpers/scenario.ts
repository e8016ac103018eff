import { fileURLToPath } from 'node:url';

/** The scenario shipped with the package. */
export const EXAMPLE_SCENARIO = fileURLToPath(new URL('../../fixtures/scenarios/hausverwaltung.json', import.meta.url));
/** The refresh tokens the example scenario gives its Kalender-Assistent and its legacy Dokumenten-Agent. */
export const KALENDER = {
  client_id: 'client_kalender',
  refresh_token: 'aa1.kalenderKalenderKalend.szenarioGeheimnisKalenderAgent0000000000000',
};
export const LEGACY = {
  client_id: 'client_dokumente_alt',
  refresh_token: 'aa1.dokumenteAltDokumenteA.szenarioGeheimnisDokumentenAgent000000000000',
};
