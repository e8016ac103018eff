import type { AdminPage } from './admin-api.js';
/**
 * Client findings: what the emulator noticed about a client's traffic that its developer should change. Findings are
 * observations, never faults: they never change what a client receives. This is their wire shape and their catalogue,
 * one entry per code (docs/findings.md's table is checked against it).
 */

export type FindingSeverity = 'error' | 'warning' | 'info';

/** Most severe first: `--fail-on warning` fails on errors and warnings. */
export const SEVERITIES = ['error', 'warning', 'info'] as const satisfies readonly FindingSeverity[];

/** Whether `severity` is `threshold` or more severe. */
export const atOrAbove = (severity: FindingSeverity, threshold: FindingSeverity): boolean =>
  SEVERITIES.indexOf(severity) <= SEVERITIES.indexOf(threshold);

interface CatalogueEntry {
  readonly severity: FindingSeverity;
  /** The spec section or RFC clause the finding rests on. */
  readonly spec: string;
  /** What makes the emulator record it, for docs/findings.md. */
  readonly trigger: string;
}

export const FINDINGS = {
  'refresh.concurrent': {
    severity: 'error',
    spec: 'spec 3.2; OAuth 2.1 §4.3.1',
    trigger: 'the same refresh token presented again within 10 s of its rotation (parallel refreshes), which killed the family',
  },
  'refresh.stale_token': {
    severity: 'error',
    spec: 'spec 3.2; OAuth 2.1 §4.3.1',
    trigger: 'a rotated refresh token presented later than 10 s after its rotation: the client kept using an old token',
  },
  'refresh.loop': {
    severity: 'error',
    spec: 'spec 5.3; RFC 6749 §6',
    trigger: 'a family refreshed 5 times within one access-token lifetime, or 3 cycles of refresh, then refusal at the resource',
  },
  'token.identity_at_resource': {
    severity: 'error',
    spec: 'spec 4.2, 5.8; RFC 8707 §2',
    trigger: 'an access token issued without `resource` (an identity token) presented at /mcp or a REST route',
  },
  'authorize.missing_parameter': {
    severity: 'error',
    spec: 'spec 4.2; OAuth 2.1 §4.1.1',
    trigger:
      'an authorization request without `scope`, `state`, `code_challenge`, `code_challenge_method` or `redirect_uri` (refused), or ' +
      'without `resource` (a warning: it yields an identity token)',
  },
  'ratelimit.retry_too_early': {
    severity: 'warning',
    spec: 'spec 7, 8; RFC 9110 §10.2.3',
    trigger:
      'a request with the same grant that arrived (its head received) after a 429 was delivered, before its Retry-After passed; a ' +
      'request already sent when the 429 went out is never one, however late it is handled',
  },
  'idempotency.retry_without_key': {
    severity: 'warning',
    spec: 'spec 4.4 rule 5',
    trigger: 'the same body charged twice on one route within 5 minutes, without Idempotency-Key',
  },
  'registration.repeated': {
    severity: 'warning',
    spec: 'spec 4.1; RFC 7591 §3',
    trigger: 'a client with the same client_name and redirect URIs registered for the third time or more',
  },
  'grant.abandoned': {
    severity: 'warning',
    spec: 'spec 3.3, 5.7; RFC 7009 §2',
    trigger:
      'a client, or the same software registered again (same name and redirect URIs), has a newer grant for the same person while an ' +
      'older one is still active and was not used since',
  },
  'scope.unused': {
    severity: 'info',
    spec: 'spec 5.9',
    trigger: 'a scope granted in this run and not used by any request of that grant (judged when findings are read)',
  },
} as const satisfies Record<string, CatalogueEntry>;

export type FindingCode = keyof typeof FINDINGS;

export const FINDING_CODES = Object.keys(FINDINGS) as FindingCode[];

/** One finding as `GET /_admin/findings`, the `finding.recorded` event and `emu.findings()` carry it. */
export interface Finding {
  /** Stable for one thing noticed: the same code for the same client and subject counts up instead of repeating. */
  readonly id: string;
  readonly code: FindingCode;
  readonly severity: FindingSeverity;
  readonly client_id: string;
  /** The client's registered name, when it is known. */
  readonly client_name: string | null;
  readonly grant_id: string | null;
  readonly family_id: string | null;
  /** How often it was seen. */
  readonly count: number;
  /** Emulator clock, epoch ms. */
  readonly first_at: number;
  readonly last_at: number;
  /** One sentence: what happened. */
  readonly message: string;
  /** What to change in the client. */
  readonly hint: string;
  /** The spec section or RFC it rests on. */
  readonly spec: string;
}

/** The answer of `GET /_admin/findings`. */
/** `GET /_admin/findings`: a page of them (admin-api.ts). */
export interface FindingsList extends AdminPage {
  findings: Finding[];
}

/** The findings at or above `threshold`. */
export const findingsAtOrAbove = (findings: readonly Finding[], threshold: FindingSeverity): Finding[] =>
  findings.filter((f) => atOrAbove(f.severity, threshold));

/** A finding as text for a terminal, a log or a failed assertion: a headline, then what happened, the hint and the rule. */
export function formatFinding(f: Finding): string {
  const who = f.client_name ? `${f.client_id} (“${f.client_name}”, unverified)` : f.client_id;
  return [
    `${f.severity.toUpperCase()} ${f.code} ${who}${f.count > 1 ? ` ×${f.count}` : ''}`,
    `  ${f.message}`,
    `  hint: ${f.hint}`,
    `  rests on: ${f.spec}${f.grant_id ? `; grant ${f.grant_id}` : ''}${f.family_id ? `; family ${f.family_id}` : ''}`,
  ].join('\n');
}

/** What `assertNoFindings` throws: the findings at or above its threshold, each with its hint. */
export class FindingsError extends Error {
  readonly findings: readonly Finding[];
  constructor(findings: readonly Finding[], threshold: FindingSeverity) {
    super(
      `${findings.length} client finding${findings.length === 1 ? '' : 's'} at or above ${threshold}:\n\n${findings.map(formatFinding).join('\n\n')}`,
    );
    this.name = 'FindingsError';
    this.findings = findings;
  }
}
