import { describe, expect, it } from 'vitest';
import type { PendingAction } from '../../src/core/resources/actions.js';
import type { AuthorizationRequest } from '../../src/core/oauth/authorize.js';
import type { GrantView } from '../../src/core/oauth/grants-admin.js';
import { DEFAULT_PRICES } from '../../src/protocol/charges.js';
import { actionPage, actionsPage, consentPage, documentPage, errorPage, revokePage, settingsPage } from '../../src/server/views.js';

/** U+202E RIGHT-TO-LEFT OVERRIDE with no closing U+202C: unisolated, it reverses everything after it in its paragraph. */
const RLO = '\u202E';
const person = { id: 'person-1', name: 'Anna Schmidt', email: 'anna@example.test' };

/**
 * Every U+202E of `page` stands inside a `<bdi>` element, or between U+2068 and U+2069 where no element may stand
 * (the `<title>`), so that it reverses nothing outside the value it came with.
 */
function expectEveryOverrideIsolated(page: string): void {
  let depth = 0;
  let overrides = 0;
  for (const token of page.matchAll(/<bdi\b[^>]*>|<\/bdi>|\u2068|\u2069|\u202E/gu)) {
    if (token[0] === '\u202E') {
      overrides++;
      expect(
        depth,
        `U+202E at ${token.index} outside an isolate: …${page.slice(Math.max(0, token.index - 60), token.index)}`,
      ).toBeGreaterThan(0);
    } else depth += token[0] === '</bdi>' || token[0] === '\u2069' ? -1 : 1;
  }
  expect(depth).toBe(0);
  expect(overrides).toBeGreaterThan(0);
}

const action: PendingAction = {
  id: 'action_1',
  client_id: 'client_1',
  grant_id: 'grant_1',
  person_id: person.id,
  question: `Ändere die Telefonnummer von Josef Huber auf ${RLO}+49 170 2222`,
  kind: 'contacts',
  operation: 'update',
  record_id: 'contact_1',
  fields: { phone: `${RLO}+49 170 2222` },
  before: { phone: `+49 170 1111${RLO}` },
  description: `Eintrag Kontakt „Josef${RLO} Huber“ (contact_1) ändern: Telefon von „+49 170 1111${RLO}“ auf „${RLO}+49 170 2222“.`,
  status: 'pending',
  created_at: 0,
};

describe('41.12: every value a client supplied stands in its own bidi isolate, on every page', () => {
  it('consent page: client_name and the redirect host', () => {
    const client = { client_id: 'client_1', client_name: `Kalender${RLO}`, redirect_uris: [] } as unknown as AuthorizationRequest['client'];
    const request: AuthorizationRequest = {
      client,
      redirect_uri: 'https://xn--mgbh0fb.example/callback',
      state: 's',
      scopes: ['ask'],
      resource: 'http://127.0.0.1:4100/mcp',
      code_challenge: 'c',
    };
    const page = consentPage({ request, person, ticket: 'i', csrf: 'c', resource: 'http://127.0.0.1:4100/mcp', prices: DEFAULT_PRICES });
    expectEveryOverrideIsolated(page);
    expect(page).toContain('<strong id="redirect-host"><bdi>xn--mgbh0fb.example</bdi></strong>');
  });

  it('settings page: each application name', () => {
    const grant = (id: string, name: string) =>
      ({
        id,
        client_id: `c_${id}`,
        client_name: name,
        person_id: person.id,
        scopes: ['ask'],
        status: 'active',
        created_at: 0,
        families: [],
      }) as unknown as GrantView;
    const grants = [grant('g1', `Eins${RLO}`), grant('g2', `${RLO}Zwei`)];
    expectEveryOverrideIsolated(
      settingsPage({ person, grants: { grants, total: 2, offset: 0, limit: 50, active_clients: ['c_g1', 'c_g2'] }, page: 1 }),
    );
  });

  it('45.10 the question before a revocation, and the result line that names the application', () => {
    const grant = {
      id: 'g1',
      client_id: 'c_g1',
      client_name: `Eins${RLO}<b>`,
      person_id: person.id,
      scopes: ['ask'],
      status: 'active',
      created_at: 0,
      families: [],
    } as unknown as GrantView;
    const question = revokePage({ grant, csrf: 'c' });
    expectEveryOverrideIsolated(question);
    expect(question).toContain('<h1>Zugriff für <bdi id="client-name">Eins\u202E&lt;b&gt;</bdi> widerrufen?</h1>');
    expect(question).toMatch(/<form method="post" action="\/settings\/grants\/g1\/revoke">\s*<input type="hidden" name="csrf" value="c">/);
    const revoked = { ...grant, status: 'revoked', revoked_at: 1 } as GrantView;
    expect(revokePage({ grant: revoked, csrf: 'c' })).not.toContain('<form');
    const result = settingsPage({
      person,
      grants: { grants: [revoked], total: 1, offset: 0, limit: 50, active_clients: [] },
      page: 1,
      revoked,
    });
    expectEveryOverrideIsolated(result);
    expect(result).toContain(
      '<p class="note" role="status">Der Zugriff von <strong><bdi>Eins\u202E&lt;b&gt;</bdi></strong> wurde widerrufen.</p>',
    );
  });

  it('document page: title (also in <title>), file name and content', () => {
    const page = documentPage({
      title: `Notiz${RLO} 1`,
      file_name: 'notiz.md',
      content: `# Notiz${RLO} 1\n\nHufschmied ${RLO}am Dienstag.`,
    });
    expectEveryOverrideIsolated(page);
    // In the title, where no <bdi> may stand, the value's own bidi controls go: a U+2069 in it would end the isolate early.
    expect(page).toContain('<title>\u2068Notiz 1\u2069</title>');
    expect(documentPage({ title: `a\u2069${RLO}b`, file_name: 'a.md', content: 'x' })).toContain('<title>\u2068ab\u2069</title>');
  });

  it('error page: the description and the hint for developers', () => {
    expectEveryOverrideIsolated(
      errorPage('Fehler', 'invalid_request', `redirect_uri "https://a${RLO}.example" is not registered`, `use ${RLO}x`),
    );
    expectEveryOverrideIsolated(errorPage('Fehler', 'access_denied', `nicht ${RLO}erlaubt`));
  });

  it('approval pages: the description, the old and new values and the question show their invisible characters, isolated', () => {
    const one = actionPage({ action, clientName: `Bot${RLO}`, csrf: 'c' });
    const list = actionsPage({ actions: [{ ...action, client_name: `Bot${RLO}` }] });
    for (const page of [one, list]) {
      expectEveryOverrideIsolated(page);
      // Shown as its code point where the person approves exact values: the new number reads +49 170 2222, not reversed.
      expect(page).toContain('⟨U+202E⟩');
    }
    expect(one.match(/\u202E/gu)).toHaveLength(1); // only in the client's name, which is isolated
    expect(one).toContain('<td><bdi><span class="invisible" title="unsichtbares Zeichen U+202E">⟨U+202E⟩</span>+49 170 2222</bdi></td>');
  });
});
