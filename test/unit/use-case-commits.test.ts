/**
 * Issue 47.3: a use case commits once, at its boundary, and the rules under it never commit (docs/architecture.md,
 * "Where a use case becomes durable"). On the core in memory and a manual clock.
 */
import { readFile, readdir } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import type { Core } from '../../src/core/core.js';
import { RESOURCE, authorize, exchangeCode, oauthError, openCore, refresh, register, walkToTokens } from './helpers.js';

/** Records, in order, each commit of the core as it starts and ends, beside the events the core says. */
function watchCommits(core: Core, log: string[]) {
  const commit = core.commit.bind(core);
  const spy = vi.spyOn(core, 'commit').mockImplementation(async () => {
    log.push('commit');
    await commit();
    log.push('durable');
  });
  // The findings' own events are what the core saw, not what the use case did.
  core.events.subscribe((e) => e.name !== 'finding.recorded' && log.push(e.name));
  return spy;
}

describe('47.3 one commit per use case', () => {
  it('47.3 a refresh stores its family once and commits once; tokens.issued is said after the commit is durable', async () => {
    const { core } = await openCore();
    const { client, tokens } = await walkToTokens(core);
    const family = Object.values(core.state.families)[0]!;
    const log: string[] = [];
    const commits = watchCommits(core, log);
    const put = vi.spyOn(core.repo, 'put');
    const next = await refresh(core, client.client_id, tokens.refresh_token);
    expect(next.refresh_token).toBeTruthy();
    expect(put.mock.calls.filter(([table, id]) => table === 'families' && id === family.id)).toHaveLength(1);
    expect(commits).toHaveBeenCalledTimes(1);
    expect(log).toEqual(['refresh.rotated', 'commit', 'durable', 'tokens.issued']);
    // What was stored once is the rotated family with the new access token listed.
    const stored = core.state.families[family.id]!;
    const jti = (JSON.parse(Buffer.from(next.access_token.split('.')[1]!, 'base64url').toString()) as { jti: string }).jti;
    expect(stored.current.generation).toBe(2);
    expect(stored.access_tokens.at(-1)?.jti).toBe(jti);
  });

  it('47.3 a replayed refresh token: the family ends in the exchange’s one commit, durable before the refusal is said', async () => {
    const { core } = await openCore();
    const { client, tokens } = await walkToTokens(core);
    await refresh(core, client.client_id, tokens.refresh_token);
    const log: string[] = [];
    const commits = watchCommits(core, log);
    const refused = refresh(core, client.client_id, tokens.refresh_token).finally(() => log.push('refused'));
    expect(await oauthError(refused)).toBe('invalid_grant');
    expect(commits).toHaveBeenCalledTimes(1);
    expect(log).toEqual(['family.invalidated', 'refresh.refused', 'commit', 'durable', 'refused']);
  });

  it('47.3 a replayed authorization code: what it produced ends in the exchange’s one commit', async () => {
    const { core } = await openCore();
    const client = await register(core);
    const authorized = await authorize(core, client, { scope: 'ask', resource: RESOURCE });
    await exchangeCode(core, authorized);
    const log: string[] = [];
    const commits = watchCommits(core, log);
    expect(await oauthError(exchangeCode(core, authorized))).toBe('invalid_grant');
    expect(commits).toHaveBeenCalledTimes(1);
    expect(log).toEqual(['family.invalidated', 'code.replayed', 'commit', 'durable']);
  });

  it('47.3 only the use cases of docs/architecture.md commit: no rule module under src/core/ calls commit()', async () => {
    const doc = await readFile(new URL('../../docs/architecture.md', import.meta.url), 'utf8');
    const section = doc.slice(doc.indexOf('## Where a use case becomes durable'), doc.indexOf('\n## ', doc.indexOf('## Where a use case')));
    const listed = new Set([...section.matchAll(/`core\/([\w/.-]+\.ts)`/g)].map((m) => m[1]!));
    const root = new URL('../../src/core/', import.meta.url).pathname;
    const committing = new Set<string>();
    for (const entry of await readdir(root, { recursive: true })) {
      if (!entry.endsWith('.ts')) continue;
      const text = await readFile(join(root, entry), 'utf8');
      if (/\.commit\(\)/.test(text)) committing.add(entry.split('\\').join('/'));
    }
    expect([...committing].sort()).toEqual([...listed].sort());
    expect(listed.size).toBeGreaterThan(5);
    expect([...listed].map((f) => basename(f))).toContain('token-endpoint.ts');
  });
});
