import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { GrantSeed } from '../core/core.js';
import { AgentAccessError } from '../core/state/errors.js';
import type { Person } from '../core/state/persons.js';
import {
  WORKSPACE_KINDS,
  emptyWorkspace,
  markdownTitle,
  type KnowledgeDocument,
  type Workspace,
  type WorkspaceRecord,
} from '../core/resources/workspace.js';

/** The fixtures shipped with the package. */
export const DEFAULT_FIXTURES_DIR = fileURLToPath(new URL('../../fixtures/', import.meta.url));

export interface Fixtures {
  dir: string;
  persons: Person[];
  grants: GrantSeed[];
  workspace: Workspace;
  knowledge: KnowledgeDocument[];
}

const fail = (file: string, what: string) => new AgentAccessError('fixtures_invalid', `fixture ${file}: ${what}`);

async function readJson(file: string, optional: boolean): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    if (optional && (e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw fail(file, `cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw fail(file, `is not valid JSON (${(e as Error).message})`);
  }
}

const isString = (v: unknown): v is string => typeof v === 'string' && v.length > 0;
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;
/** Array.isArray narrows to any[]; fixture entries are unknown until checked. */
const isList = (v: unknown): v is unknown[] => Array.isArray(v);

/**
 * Reads a fixtures directory: `persons.json` (required: `[{id, name, email, default?}]`) and
 * `grants.json` (optional: grants to create in a new state, e.g. a legacy grant with retired scopes).
 */
export async function loadFixtures(dir: string = DEFAULT_FIXTURES_DIR): Promise<Fixtures> {
  const personsFile = join(dir, 'persons.json');
  const persons = await readJson(personsFile, false);
  if (!isList(persons) || persons.length === 0) throw fail(personsFile, 'must be a non-empty array of persons');
  persons.forEach((p, i) => {
    if (!isObject(p) || !isString(p.id) || !isString(p.name) || !isString(p.email)) {
      throw fail(personsFile, `entry ${i} needs string fields id, name and email`);
    }
  });
  const grantsFile = join(dir, 'grants.json');
  const grants = (await readJson(grantsFile, true)) ?? [];
  if (!isList(grants)) throw fail(grantsFile, 'must be an array of grants');
  grants.forEach((g, i) => {
    const ok =
      isObject(g) &&
      isObject(g.client) &&
      isString(g.client.client_id) &&
      isString(g.client.client_name) &&
      isList(g.client.redirect_uris) &&
      g.client.redirect_uris.every(isString) &&
      isString(g.person_id) &&
      isList(g.scopes) &&
      g.scopes.every(isString) &&
      (g.resource === 'mcp' || g.resource === null) &&
      isString(g.refresh_token);
    if (!ok)
      throw fail(
        grantsFile,
        `entry ${i} needs client {client_id, client_name, redirect_uris}, person_id, scopes, resource ("mcp" or null) and refresh_token`,
      );
  });
  const handles = new Set<string>();
  (grants as Array<GrantSeed & { refresh_token: string }>).forEach((g, i) => {
    const handle = g.refresh_token.split('.')[1] ?? '';
    if (!/^aa1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(g.refresh_token))
      throw fail(grantsFile, `entry ${i}: refresh_token must have the form aa1.<handle>.<secret> (base64url parts)`);
    if (handles.has(handle))
      throw fail(grantsFile, `entry ${i}: refresh_token handle "${handle}" is used by another grant; every grant needs its own`);
    handles.add(handle);
  });
  return {
    dir,
    persons: persons as Person[],
    grants: grants as GrantSeed[],
    workspace: await loadWorkspace(dir),
    knowledge: await loadKnowledge(dir),
  };
}

/** `workspace/<kind>.json` (each optional): arrays of records with string `id` and `title`, ids unique. */
async function loadWorkspace(dir: string): Promise<Workspace> {
  const workspace = emptyWorkspace();
  const ids = new Set<string>();
  for (const kind of WORKSPACE_KINDS) {
    const file = join(dir, 'workspace', `${kind}.json`);
    const records = await readJson(file, true);
    if (records === undefined) continue;
    if (!isList(records)) throw fail(file, 'must be an array of records');
    records.forEach((r, i) => {
      if (!isObject(r) || !isString(r.id) || !isString(r.title)) throw fail(file, `entry ${i} needs string fields id and title`);
      if (ids.has(r.id)) throw fail(file, `id "${r.id}" is used twice`);
      ids.add(r.id);
    });
    workspace[kind] = records as WorkspaceRecord[];
  }
  return workspace;
}

/** `knowledge/*.md`: the knowledge base, one document per file, titled by its first `# ` heading. */
async function loadKnowledge(dir: string): Promise<KnowledgeDocument[]> {
  let names: string[];
  try {
    names = (await readdir(join(dir, 'knowledge'))).filter((n) => n.endsWith('.md')).sort();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw e;
  }
  return Promise.all(
    names.map(async (file_name) => {
      const content = await readFile(join(dir, 'knowledge', file_name), 'utf8');
      return { id: `kb-${file_name.replace(/\.md$/, '')}`, title: markdownTitle(content, file_name), file_name, content };
    }),
  );
}
