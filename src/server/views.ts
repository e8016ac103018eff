import { fieldLabel, type PendingAction } from '../core/resources/actions.js';
import type { AuthorizationRequest } from '../core/oauth/authorize.js';
import type { GrantPage, GrantView } from '../core/oauth/grants-admin.js';
import type { Prices } from '../core/state/charges.js';
import type { Person } from '../core/state/persons.js';
import { SCOPES, isSupportedScope } from '../core/oauth/scopes.js';
import { exactly, html, isolated, isolatedText, page } from '../protocol/html.js';

// Every value a client or agent supplied stands in its own bidi isolate (`isolated`); on the approval pages, where
// the person approves values exactly, their invisible characters are shown too (`exactly`).

const when = (ms: number | null | undefined) =>
  ms ? new Date(ms).toLocaleString('de-DE', { dateStyle: 'medium', timeStyle: 'short' }) : '–';

/** A scope as the person reads it; a retired one (spec 9, still on an old grant) by its name and what happens to it. */
function scopeText(scope: string): { label: string; description: string; writes: boolean } {
  if (isSupportedScope(scope)) return SCOPES[scope];
  return {
    label: scope,
    description: 'Diese Berechtigung gibt es nicht mehr; sie entfällt, sobald die Anwendung ihren Zugriff das nächste Mal erneuert.',
    writes: false,
  };
}

const writeBadge = (writes: boolean) => (writes ? html` <span class="badge write">Schreibzugriff</span>` : '');

// Sentences of the pages, kept whole here so the templates stay readable (none holds a character HTML escapes).
const AKH_NOTE =
  'AKh ist die Einheit, in der der Agent Access Service abrechnet, was eine Anwendung in Ihrem Namen in Auftrag gibt. ' +
  'Den Stand einer Recherche abzufragen kostet nichts.';
const ASKED_EVERY_TIME = 'Sie werden bei jeder Anmeldung erneut gefragt. Einen erteilten Zugriff können Sie jederzeit unter ';
const REVOKE_CONSEQUENCE =
  'Die Anwendung kann danach nicht mehr in Ihrem Namen zugreifen: Schon ihre nächste Anfrage wird abgelehnt. ' +
  'Um ihr wieder Zugriff zu geben, melden Sie sich in der Anwendung erneut an.';
/** The settings page's revoke button, described by the grant's line and its client's heading. */
const revokeButton = (ref: string) => html`<button type="submit" aria-describedby="${ref.replace(/-\d+$/, '')} ${ref}">Widerrufen</button>`;

/** An amount of AKh as a German reader writes it: `0,1`, `2`. */
const akh = (amount: number) => `${amount.toLocaleString('de-DE')} AKh`;

/** What a scope's calls cost at this service's prices (spec 1: research, and ask), in a sentence; free ones none. */
function priceOf(scope: string, prices: Prices): string | undefined {
  if (scope === 'research') return `Jede Recherche kostet ${akh(prices.research)}.`;
  if (scope === 'ask') return `Jede Frage kostet ${akh(prices.ask)}.`;
  return undefined;
}

/**
 * On the consent page: the short label, whether it writes, what it allows in a sentence, what it costs, and the scope's
 * name for developers.
 */
function scopeItem(scope: string, prices: Prices) {
  const { label, description, writes } = scopeText(scope);
  const price = priceOf(scope, prices);
  const text = html`<span class="scope-text">${description}${price ? html` <span class="price">${price}</span>` : ''}</span>`;
  return html`<li data-scope="${scope}"><strong>${label}</strong>${writeBadge(writes)}<br>${text} <code>${scope}</code></li>`;
}

/** Spec 4.2, 5.6: every requested scope in plain German, writes marked, client_name labelled unverified. */
export function consentPage(input: {
  request: AuthorizationRequest;
  person: Person;
  /** The screen, signed: the form carries it back (core/oauth/consent-screens.ts). */
  ticket: string;
  csrf: string;
  resource: string;
  /** This service's prices: the charged scopes say what they cost. */
  prices: Prices;
}): string {
  const { request, person } = input;
  const charged = request.scopes.some((s) => priceOf(s, input.prices));
  const target = new URL(request.redirect_uri);
  return page(
    'Zugriff erlauben?',
    html`<h1>Zugriff erlauben?</h1>
<p><strong id="client-name">${isolated(request.client.client_name)}</strong> <span class="badge">nicht verifiziert</span>
möchte im Namen von <strong>${person.name}</strong> (${person.email}) auf den Agent Access Service zugreifen.</p>
<p class="note">Der Name dieser Anwendung wurde nicht überprüft. Erlauben Sie den Zugriff nur, wenn Sie die Anmeldung selbst gestartet haben.</p>
<h2>Die Anwendung erhält diese Berechtigungen</h2>
<ul class="scopes">${request.scopes.map((s) => scopeItem(s, input.prices))}</ul>
${charged ? html`<p class="note" id="akh">${AKH_NOTE}</p>` : ''}
<p class="note">${
      request.resource !== null
        ? html`Der Zugriff gilt für die Agenten-Schnittstelle <code>${input.resource}</code>.`
        : 'Die Anwendung hat keine Ressource angegeben. Sie erhält damit nur einen Nachweis Ihrer Identität, ' +
          'den die Werkzeuge des Arbeitsbereichs nicht annehmen.'
    }</p>
<p>Nach Ihrer Entscheidung werden Sie zu <strong id="redirect-host">${isolated(target.host)}</strong> weitergeleitet.</p>
<form method="post" action="/consent">
<input type="hidden" name="interaction" value="${input.ticket}">
<input type="hidden" name="csrf" value="${input.csrf}">
<div class="buttons">
<button type="submit" name="decision" value="approve" class="primary">Zulassen</button>
<button type="submit" name="decision" value="deny">Ablehnen</button>
</div>
</form>
<p class="note">${ASKED_EVERY_TIME}<a href="/settings">Verbundene Anwendungen</a> widerrufen.</p>`,
  );
}

/**
 * What the person reads for the errors whose own description is written for the client's developer (English, technical);
 * the description and its hint go into the page's "Für Entwickler" part. Errors not listed were written for the person.
 */
const FOR_THE_PERSON: Record<string, string> = {
  invalid_client: 'Die Anwendung, die Sie hierher geschickt hat, ist bei diesem Dienst nicht registriert.',
  invalid_request: 'Die Anfrage der Anwendung ist unvollständig oder fehlerhaft.',
  invalid_scope: 'Die Anwendung hat Berechtigungen angefragt, die dieser Dienst nicht kennt.',
  body_too_large: 'Die Anfrage der Anwendung ist zu groß.',
  unsupported_media_type: 'Die Anfrage der Anwendung hat ein Format, das dieser Dienst nicht annimmt.',
  method_not_allowed: 'Diese Adresse nimmt die Anfrage der Anwendung in dieser Form nicht an.',
  server_error: 'Beim Dienst ist ein Fehler aufgetreten. Bitte versuchen Sie es später noch einmal.',
  grant_not_found: 'Diesen Zugriff gibt es nicht, oder er gehört nicht zu Ihrem Konto.',
};

/**
 * `description` and `hint` are for the client's developer; the person reads a German sentence (FOR_THE_PERSON).
 * `notReturned`: the page stands where the authorization endpoint would have sent the person back to the application.
 */
export function errorPage(title: string, error: string, description: string, hint?: string, notReturned = false): string {
  const forPerson = FOR_THE_PERSON[error];
  return page(
    title,
    html`<div class="error"><h1>${title}</h1>
<p>${forPerson ?? isolated(description)}</p>
<p class="note">Fehlercode: <code>${error}</code></p></div>
${notReturned ? html`<p class="note">Sie wurden nicht zur Anwendung zurückgeleitet, weil deren Angaben nicht geprüft werden konnten.</p>` : ''}
${
  forPerson || hint
    ? html`<details class="developer"><summary>Für Entwickler</summary>
${forPerson ? html`<p lang="en">${isolated(description)}</p>` : ''}${hint ? html`<p lang="en">Hint: ${isolated(hint)}</p>` : ''}</details>`
    : ''
}`,
  );
}

/** One application (client) on the settings page with its grants: one per approval, so a re-login adds a grant, not an application. */
interface ClientGrants {
  client_id: string;
  client_name: string;
  active: GrantView[];
  revoked: GrantView[];
}

/** Groups grants by client, keeping their order within each group and ordering groups by their first grant. */
function byClient(grants: GrantView[]): ClientGrants[] {
  const groups = new Map<string, ClientGrants>();
  for (const g of grants) {
    let group = groups.get(g.client_id);
    if (!group) {
      group = { client_id: g.client_id, client_name: g.client_name, active: [], revoked: [] };
      groups.set(g.client_id, group);
    }
    (g.status === 'active' ? group.active : group.revoked).push(g);
  }
  return [...groups.values()];
}

const count = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

/** A scope in a grant: the short label only; the sentence is a tooltip, the consent page showed it in full. */
function scopeChip(scope: string) {
  const { label, description, writes } = scopeText(scope);
  return html`<li data-scope="${scope}" title="${description}">${label}${writeBadge(writes)}</li>`;
}

/**
 * One grant; `ref` makes the ids its button is described by, so that the buttons, all named "Widerrufen", say to a
 * screen reader which application and which grant they end.
 */
function grantItem(g: GrantView, ref: string) {
  const meta =
    g.status === 'active'
      ? html`Aktiv seit ${when(g.created_at)} · ${g.last_used_at ? html`zuletzt genutzt ${when(g.last_used_at)}` : 'noch nicht genutzt'}`
      : html`Widerrufen am ${when(g.revoked_at)} · erteilt am ${when(g.created_at)}`;
  return html`<li class="grant" data-grant="${g.id}"><div class="what">
<ul class="chips">${g.scopes.map(scopeChip)}</ul>
<p class="meta" id="${ref}">${meta}</p></div>${
    g.status === 'active'
      ? // A GET to the question first: the revocation is asked once, with or without JavaScript.
        html`<form method="get" action="/settings/grants/${encodeURIComponent(g.id)}/revoke">${revokeButton(ref)}</form>`
      : ''
  }</li>`;
}

/** An application's grants; `ref` is the id of its name (`app-…`), and its grants' ids follow from it. */
function clientSection(group: ClientGrants, ref: string) {
  const item = (offset: number) => (g: GrantView, i: number) => grantItem(g, `${ref}-${offset + i}`);
  const revoked = html`<ul class="grants">${group.revoked.map(item(group.active.length))}</ul>`;
  return html`<section class="client" data-client="${group.client_id}">
<h2><bdi id="${ref}">${group.client_name}</bdi> <span class="badge">nicht verifiziert</span></h2>
<p class="client-id">Client-ID <code>${group.client_id}</code></p>
${
  group.active.length > 1
    ? html`<p class="note">${count(
        group.active.length,
        'aktiver Zugriff',
        'aktive Zugriffe',
      )}: Jede Anmeldung erteilt einen eigenen Zugriff, den Sie einzeln widerrufen können.</p>`
    : ''
}${
    group.active.length > 0
      ? html`<ul class="grants">${group.active.map(item(0))}</ul>
${
  group.revoked.length > 0
    ? html`<details class="revoked"><summary>${count(
        group.revoked.length,
        'widerrufener Zugriff',
        'widerrufene Zugriffe',
      )}</summary>${revoked}</details>`
    : ''
}`
      : revoked
  }
</section>`;
}

/** Grants per page of the settings page: a person with thousands of grants gets pages, not one page of megabytes. */
export const SETTINGS_PAGE_SIZE = 50;

/** Where the person is among the pages of grants, and the links to the others (none when there is one page). */
function pager(grants: GrantPage, page: number) {
  const pages = Math.ceil(grants.total / grants.limit);
  if (pages <= 1) return '';
  const first = grants.offset + 1;
  const last = grants.offset + grants.grants.length;
  const link = (to: number, text: string, rel: string) => html`<a href="/settings?page=${to}" rel="${rel}">${text}</a>`;
  const total = html`<span id="grant-total">${grants.total}</span>`;
  return html`<nav class="pages" aria-label="Seiten"><p class="note">Zugriffe ${first}–${last} von ${total} · Seite ${page} von ${pages}</p>
<p>${page > 1 ? html`${link(1, '« Erste', 'first')} · ${link(page - 1, '‹ Vorige', 'prev')}` : ''}${page > 1 && page < pages ? ' · ' : ''}${
    page < pages ? html`${link(page + 1, 'Nächste ›', 'next')} · ${link(pages, 'Letzte »', 'last')}` : ''
  }</p></nav>`;
}

/**
 * Spec 3.3, 5.7: the person sees the stored grants and revokes any of them, SETTINGS_PAGE_SIZE a page, active ones
 * first. Grouped by application: those with an active grant first, each revocable; revoked grants folded away,
 * applications with none active (on any page) at the very end.
 */
export function settingsPage(input: { person: Person; grants: GrantPage; page: number; revoked?: GrantView }): string {
  const groups = byClient(input.grants.grants);
  const active = new Set(input.grants.active_clients);
  const current = groups.filter((g) => active.has(g.client_id));
  const former = groups.filter((g) => !active.has(g.client_id));
  const nav = pager(input.grants, input.page);
  return page(
    'Verbundene Anwendungen',
    html`<h1>Verbundene Anwendungen</h1>
<p>Angemeldet als <strong>${input.person.name}</strong> (${input.person.email}).</p>
${input.revoked ? html`<p class="note" role="status">Der Zugriff von <strong>${isolated(input.revoked.client_name)}</strong> wurde widerrufen.</p>` : ''}
${nav}<div id="grants">${
      input.grants.total === 0
        ? html`<p>Sie haben noch keiner Anwendung Zugriff erteilt.</p>`
        : html`${active.size === 0 ? html`<p>Keine Anwendung hat zurzeit Zugriff.</p>` : ''}${current.map((g, i) => clientSection(g, `app-${i}`))}${
            former.length > 0
              ? html`<details class="former"><summary>${count(former.length, 'Anwendung', 'Anwendungen')} ohne aktiven Zugriff</summary>${former.map(
                  (g, i) => clientSection(g, `app-${current.length + i}`),
                )}</details>`
              : ''
          }`
    }</div>
${nav}
<p class="note">Ein Widerruf wirkt sofort: Schon die nächste Anfrage der Anwendung wird abgelehnt, auch wenn ihr Token noch nicht abgelaufen ist.</p>`,
  );
}

/**
 * Spec 3.3, 5.7: the question before a revocation, a page of its own so that it needs no JavaScript: which application,
 * what it may do, and the form that revokes (with the settings page's CSRF token). A grant already revoked says so.
 */
export function revokePage(input: { grant: GrantView; csrf: string }): string {
  const { grant } = input;
  const active = grant.status === 'active';
  return page(
    active ? 'Zugriff widerrufen?' : 'Zugriff widerrufen',
    html`<h1>Zugriff für <bdi id="client-name">${grant.client_name}</bdi> ${active ? 'widerrufen?' : 'ist widerrufen'}</h1>
<p><span class="badge">nicht verifiziert</span> Client-ID <code>${grant.client_id}</code></p>
<ul class="chips">${grant.scopes.map(scopeChip)}</ul>
<p class="meta">${active ? html`Aktiv seit ${when(grant.created_at)}` : html`Widerrufen am ${when(grant.revoked_at)}`}</p>
${
  active
    ? html`<p>${REVOKE_CONSEQUENCE}</p>
<form method="post" action="/settings/grants/${encodeURIComponent(grant.id)}/revoke">
<input type="hidden" name="csrf" value="${input.csrf}">
<div class="buttons">
<button type="submit" class="primary">Widerrufen</button>
<a href="/settings">Abbrechen</a>
</div>
</form>`
    : html`<p><a href="/settings">Zurück zu den verbundenen Anwendungen</a></p>`
}`,
  );
}

/** A knowledge or training document as the person opens it from its link (spec 4.4 GET /training/{id}/url). */
export function documentPage(doc: { title: string; file_name: string; content: string }): string {
  return page(
    isolatedText(doc.title),
    html`<h1>${isolated(doc.title)}</h1>
<p class="note">Datei <code>${isolated(doc.file_name)}</code> in Ihrer Wissensdatenbank.</p>
<pre style="white-space:pre-wrap;font-family:inherit">${isolated(doc.content)}</pre>`,
  );
}

/** A field's value before the change, where the action changes one that had a value. */
const before = (action: PendingAction, field: string) => {
  const value = action.before?.[field];
  return value === undefined ? '' : exactly(value);
};

const ACTION_STATUS: Record<PendingAction['status'], string> = {
  pending: 'wartet auf Ihre Freigabe',
  approved: 'freigegeben; wird ausgeführt, sobald der Agent weitermacht',
  rejected: 'abgelehnt; es wurde nichts geändert',
  applied: 'ausgeführt',
};

/** Spec 2.7 workspace.write: one action, exactly what it changes, and the person's two buttons. */
export function actionPage(input: { action: PendingAction; clientName: string; csrf: string; notice?: string }): string {
  const { action } = input;
  return page(
    'Änderung freigeben?',
    html`<h1>Änderung freigeben?</h1>
<p><strong id="client-name">${isolated(input.clientName)}</strong> <span class="badge">nicht verifiziert</span> möchte Ihren Arbeitsbereich ändern:</p>
<p id="description"><strong>${exactly(action.description)}</strong></p>
<table id="changes"><thead><tr><th>Feld</th><th>${action.operation === 'update' ? 'Bisher' : ''}</th><th>Neu</th></tr></thead><tbody>${Object.entries(
      action.fields,
    ).map(
      ([field, value]) =>
        html`<tr><td>${fieldLabel(action.kind, field)}</td><td>${before(action, field)}</td><td>${exactly(value)}</td></tr>`,
    )}</tbody></table>
<p class="note">Anlass war die Anfrage: „${exactly(action.question)}“</p>
${input.notice ? html`<p class="note" role="status">${input.notice}</p>` : ''}
<p>Status: <span id="status">${ACTION_STATUS[action.status]}</span></p>
${
  action.status === 'pending'
    ? html`<form method="post" action="/actions/${encodeURIComponent(action.id)}">
<input type="hidden" name="csrf" value="${input.csrf}">
<div class="buttons">
<button type="submit" name="decision" value="approve" class="primary">Freigeben</button>
<button type="submit" name="decision" value="reject">Ablehnen</button>
</div>
</form>`
    : ''
}
<p class="note">Jede Änderung wird einzeln freigegeben. <a href="/actions">Alle Aktionen</a> · <a href="/settings">Verbundene Anwendungen</a></p>`,
  );
}

/** The person's actions, pending first. */
export function actionsPage(input: { actions: Array<PendingAction & { client_name: string }> }): string {
  const rows = input.actions.map(
    (a) => html`<tr data-action="${a.id}"><td><a href="/actions/${encodeURIComponent(a.id)}">${exactly(a.description)}</a></td>
<td>${isolated(a.client_name)} <span class="badge">nicht verifiziert</span></td><td>${when(a.created_at)}</td><td>${ACTION_STATUS[a.status]}</td></tr>`,
  );
  return page(
    'Aktionen von Agenten',
    html`<h1>Aktionen von Agenten</h1>
${
  input.actions.length === 0
    ? html`<p>Es gibt keine Aktionen.</p>`
    : html`<table><thead><tr><th>Änderung</th><th>Anwendung</th><th>Vorbereitet</th><th>Status</th></tr></thead><tbody>${rows}</tbody></table>`
}`,
  );
}
