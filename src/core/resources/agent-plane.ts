import { applyChange, planChange, type PendingAction } from './actions.js';
import { asksForChange } from './ask.js';
import type { CoreContext } from '../context.js';
import type { AccessContext } from '../oauth/resource-guard.js';
import { newId, randomToken } from '../state/crypto.js';
import { ProblemError } from '../state/errors.js';
import type { Answer, Charged } from './metering.js';
import type { ResourceService } from './resource-service.js';
import type { Workspace, WorkspaceKind, WorkspaceRecord } from './workspace.js';

/** What the agent plane's ask and continue_ask answer (spec 4.5: shapes not shown; README). */
export type AgentOutcome = 'answered' | 'refused' | 'unclear' | 'pending_approval' | 'rejected' | 'applied';

/** The `ask` and `continue_ask` tools' answer: the outcome and the answer text, with the fields the outcome brings. */
export type AgentAnswer = { outcome: AgentOutcome; answer: string } & Record<string, unknown>;

const RECORD_PREFIX: Record<WorkspaceKind, string> = {
  documents: 'doc',
  contacts: 'con',
  places: 'pla',
  work_items: 'wi',
  listings: 'lis',
  animals: 'ani',
  letters: 'let',
};

/**
 * The agent plane's own logic (spec 2.7 workspace.write, 4.4 rule 1, 4.5): `ask` that may prepare a write
 * action, the person's decision, and `continue_ask` that applies it. Reading, research and training are
 * the ResourceService's, shared with the REST routes.
 */
export class AgentPlane {
  constructor(
    private readonly core: CoreContext,
    private readonly resources: ResourceService,
    private readonly workspace: Workspace,
  ) {}

  /** Where the person decides on an action. */
  approvalUrl(actionId: string): string {
    return `${this.core.urls.authUrl}/actions/${encodeURIComponent(actionId)}`;
  }

  /**
   * Spec 4.4 rule 1 on the agent plane: a question that asks for a change prepares exactly one action
   * (with workspace.write) and changes nothing yet; everything else is the REST ask. Charged like an ask.
   */
  async ask(access: AccessContext, question: string): Promise<Charged<AgentAnswer>> {
    if (!asksForChange(question)) {
      const result = await this.resources.ask(access, question);
      return { ...result, value: { outcome: 'answered', ...(result.value as { answer: string }) } };
    }
    // What the REST ask finds for the same question comes along, so the plane never reaches less than the route (spec 1).
    const read = await this.resources.ask(access, question);
    // The read answer's fields (varied ones too, with --vary-unspecified) with the plane's own answer text.
    const answer = (outcome: AgentOutcome, text: string, extra: Record<string, unknown> = {}): Charged<AgentAnswer> => ({
      value: { outcome, ...(read.value as Record<string, unknown>), answer: text, ...extra },
      charge: read.charge,
      ...(read.variant ? { variant: read.variant } : {}),
    });
    if (!access.scopes.includes('workspace.write')) {
      return answer(
        'refused',
        'Diese Anfrage würde Ihren Arbeitsbereich ändern. Dafür fehlt diesem Zugang die Berechtigung „workspace.write“; es wurde nichts geändert. ' +
          'Der Agent kann die Person bitten, den Zugriff mit dieser Berechtigung neu zu erteilen.',
        { needed_scope: 'workspace.write' },
      );
    }
    const waiting = this.core.repo
      .values('pending_actions')
      .find((a) => a.grant_id === access.grant.id && (a.status === 'pending' || a.status === 'approved'));
    if (waiting) {
      return answer(
        'refused',
        `Es ist noch eine Aktion offen: ${waiting.description} Änderungen laufen eine nach der anderen; schließen Sie diese zuerst mit ` +
          `continue_ask ab (Aktion ${waiting.id}).`,
        { action_id: waiting.id, status: waiting.status },
      );
    }
    const plan = planChange(question, this.workspace, (kind) => `${RECORD_PREFIX[kind]}-${randomToken(6).toLowerCase()}`);
    if (plan.kind === 'unclear') return answer('unclear', `Es wurde nichts vorbereitet und nichts geändert. ${plan.reason}`);
    const action: PendingAction = {
      id: newId('act'),
      client_id: access.client_id,
      grant_id: access.grant.id,
      person_id: access.person_id,
      question,
      ...plan.action,
      status: 'pending',
      created_at: this.core.clock.now(),
    };
    this.core.repo.put('pending_actions', action.id, action);
    this.core.events.emit('action.pending', {
      action_id: action.id,
      client_id: action.client_id,
      grant_id: action.grant_id,
      person_id: action.person_id,
      kind: action.kind,
      operation: action.operation,
      description: action.description,
    });
    return answer(
      'pending_approval',
      `Ich habe diese Änderung vorbereitet, aber noch nichts geändert: ${action.description} Sie wird erst ausgeführt, wenn die Person ` +
        `sie freigibt (${this.approvalUrl(action.id)}). ` +
        `Rufen Sie danach continue_ask mit der Aktion ${action.id} auf.`,
      this.#actionFields(action),
    );
  }

  /** Spec 4.5 `continue_ask`: reports a waiting or rejected action, or applies an approved one (once). */
  async continueAsk(access: AccessContext, actionId: string): Promise<Answer<AgentAnswer>> {
    const action = this.core.repo.get('pending_actions', actionId);
    // Bound to the grant it was prepared under: after a revocation, a new grant of the same client cannot apply it.
    if (!action || action.grant_id !== access.grant.id || action.person_id !== access.person_id)
      throw new ProblemError('action_not_found', `no action "${actionId}"`);
    // The action as stored when the reply is made: applying it replaces the entry.
    const reply = (outcome: AgentOutcome, text: string, extra: Record<string, unknown> = {}): Answer<AgentAnswer> => ({
      value: { outcome, answer: text, ...this.#actionFields(this.core.repo.get('pending_actions', action.id) ?? action), ...extra },
    });
    switch (action.status) {
      case 'pending':
        return reply(
          'pending_approval',
          `Die Aktion wartet noch auf die Freigabe durch die Person; es wurde nichts geändert. ${action.description} Freigabe: ${this.approvalUrl(action.id)}`,
        );
      case 'rejected':
        return reply('rejected', `Die Person hat die Aktion abgelehnt; es wurde nichts geändert. (${action.description})`);
      case 'approved': {
        if (!access.scopes.includes('workspace.write'))
          throw new ProblemError('insufficient_scope', 'applying a change needs scope "workspace.write"');
        const record = this.#apply(action);
        if (!record) throw new ProblemError('record_gone', `the record ${action.record_id} no longer exists; nothing was changed`);
        await this.core.commit();
        return reply('applied', `Erledigt: ${action.description.replace(/\.$/, '')} – die Änderung ist gespeichert.`, { record });
      }
      case 'applied':
        return reply('applied', `Diese Aktion wurde bereits ausgeführt: ${action.description}`, { record: this.#current(action) });
    }
  }

  #apply(action: PendingAction): WorkspaceRecord | null {
    const now = this.core.clock.now();
    // A create carries every field; an update only the changed ones, merged over the record.
    const record = { id: action.record_id, ...action.fields } as WorkspaceRecord;
    const result = applyChange(this.workspace, { kind: action.kind, operation: action.operation, record });
    if (!result) return null;
    this.core.repo.appendWorkspaceChange({ action_id: action.id, at: now, kind: action.kind, operation: action.operation, record });
    this.core.repo.update('pending_actions', action.id, { status: 'applied', applied_at: now });
    // The workspace itself changed already; a failed re-index only delays when search finds it (rebuilt on restart).
    void this.resources.search.putRecord(action.kind, result).catch(() => undefined);
    this.core.events.emit('action.applied', {
      action_id: action.id,
      client_id: action.client_id,
      kind: action.kind,
      record_id: action.record_id,
    });
    return result;
  }

  #current(action: PendingAction): WorkspaceRecord | null {
    return this.workspace[action.kind].find((r) => r.id === action.record_id) ?? null;
  }

  #actionFields(action: PendingAction): Record<string, unknown> {
    return {
      action_id: action.id,
      status: action.status,
      description: action.description,
      kind: action.kind,
      operation: action.operation,
      record_id: action.record_id,
      fields: action.fields,
      approve_url: this.approvalUrl(action.id),
    };
  }

  // ---- the person's side ({auth_url}/actions) ---------------------------------------------------

  /** The person's actions, pending first, newest first. */
  actionsOf(personId: string): PendingAction[] {
    const order = { pending: 0, approved: 1, rejected: 2, applied: 3 } as const;
    return this.core.repo
      .values('pending_actions')
      .filter((a) => a.person_id === personId)
      .sort((a, b) => order[a.status] - order[b.status] || b.created_at - a.created_at);
  }

  actionOf(personId: string, actionId: string): PendingAction | undefined {
    const action = this.core.repo.get('pending_actions', actionId);
    return action && action.person_id === personId ? action : undefined;
  }

  /** The person approves or rejects a pending action; a decided action stays as decided. */
  async decide(personId: string, actionId: string, decision: 'approve' | 'reject'): Promise<PendingAction> {
    const action = this.actionOf(personId, actionId);
    if (!action) throw new ProblemError('action_not_found', 'Diese Aktion gibt es nicht, oder sie gehört nicht zu Ihrem Konto.');
    if (action.status !== 'pending') throw new ProblemError('action_already_decided', 'Über diese Aktion wurde bereits entschieden.');
    if (this.core.state.grants[action.grant_id]?.status !== 'active')
      throw new ProblemError(
        'grant_revoked',
        'Der Zugriff dieser Anwendung wurde widerrufen; die Aktion kann nicht mehr freigegeben werden.',
      );
    const decided = this.core.repo.update('pending_actions', action.id, {
      status: decision === 'approve' ? 'approved' : 'rejected',
      decided_at: this.core.clock.now(),
    });
    this.core.events.emit(decision === 'approve' ? 'action.approved' : 'action.rejected', {
      action_id: action.id,
      client_id: action.client_id,
      person_id: personId,
    });
    await this.core.commit();
    return decided;
  }
}

/** Replays applied changes over a freshly loaded workspace (on start). */
export function replayWorkspaceChanges(workspace: Workspace, core: CoreContext, warn: (message: string) => void = () => undefined): void {
  for (const change of core.state.workspace_changes) {
    if (!applyChange(workspace, change))
      warn(`workspace change of action ${String(change?.action_id)} skipped: its record is not in these fixtures`);
  }
}
