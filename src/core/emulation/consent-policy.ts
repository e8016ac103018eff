import { ProblemError } from '../state/errors.js';
import type { ConsentPolicy } from '../oauth/consent-screens.js';
import { isRetiredScope, isSupportedScope, type Scope } from '../oauth/scopes.js';

export type { ConsentPolicy } from '../oauth/consent-screens.js';

export const CONSENT_DECISIONS = ['page', 'approve', 'deny'] as const;

export interface ConsentPolicyView {
  /** The policy for every client without one of its own. */
  default: ConsentPolicy;
  clients: Record<string, ConsentPolicy>;
}

/** Checks an untrusted policy (flag, admin API): a known decision, and scopes only with approve, all supported. */
export function parseConsentPolicy(input: { decision: string; scopes?: string[] }): ConsentPolicy {
  const bad = (message: string) => new ProblemError('invalid_consent_policy', message);
  if (!(CONSENT_DECISIONS as readonly string[]).includes(input.decision))
    throw bad(`decision "${input.decision}" is not one of ${CONSENT_DECISIONS.join(', ')}`);
  if (input.scopes === undefined) return { decision: input.decision } as ConsentPolicy;
  if (input.decision !== 'approve') throw bad('scopes go with decision "approve" only (approve a subset of what is requested)');
  if (input.scopes.length === 0) throw bad('scopes is empty; leave it out to approve everything requested, or use decision "deny"');
  const retired = input.scopes.filter(isRetiredScope);
  if (retired.length > 0) throw bad(`retired scope ${retired.join(', ')} can never be granted`);
  const unknown = input.scopes.filter((s) => !isSupportedScope(s));
  if (unknown.length > 0) throw bad(`unsupported scope ${unknown.join(', ')}`);
  return { decision: 'approve', scopes: [...new Set(input.scopes)] as Scope[] };
}

/** The policies in force: one for all clients, and one per client that overrides it. Kept in memory. */
export class ConsentPolicies {
  #default: ConsentPolicy = { decision: 'page' };
  readonly #clients = new Map<string, ConsentPolicy>();

  /** Sets the policy for one client, or (clientId null) for all clients; `page` for one client removes its own. */
  set(clientId: string | null, policy: ConsentPolicy): void {
    if (clientId === null) this.#default = policy;
    else if (policy.decision === 'page' && this.#default.decision === 'page') this.#clients.delete(clientId);
    else this.#clients.set(clientId, policy);
  }

  /** Back to the page for everyone. */
  clear(): void {
    this.#default = { decision: 'page' };
    this.#clients.clear();
  }

  for(clientId: string): ConsentPolicy {
    return this.#clients.get(clientId) ?? this.#default;
  }

  view(): ConsentPolicyView {
    return { default: this.#default, clients: Object.fromEntries(this.#clients) };
  }
}
