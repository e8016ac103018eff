import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { AgentPlane } from '../core/agent-plane.js';
import type { Allowlist, OperationResult } from '../core/allowlist.js';
import type { AccessContext, Core } from '../core/core.js';
import { BearerError, ProblemError } from '../core/errors.js';
import { RateLimitedError } from '../core/rate-limit.js';
import { WORKSPACE_KINDS } from '../core/workspace.js';
import { setRateLimitHeaders } from './rest-routes.js';

/** The scope each tool needs (spec 2.7, 4.4: the same as its REST twin). */
export const TOOL_SCOPES = {
  ask: 'ask',
  continue_ask: 'workspace.write',
  start_research: 'research',
  get_research: 'research',
  add_training_document: 'training.write',
  get_training_document: 'training.write',
  get_training_document_url: 'training.write',
} as const;
export type ToolName = keyof typeof TOOL_SCOPES;

/** Spec 4.4 rule 6, 9: the per-kind read tools, removed together with their routes. Not listed; refused. */
export const RETIRED_TOOLS: readonly string[] = WORKSPACE_KINDS.flatMap((kind) => [`${kind}_list`, `${kind}_get`]);

/** Charges, idempotency keys and rate-limit events of a tool are kept under this route name. */
const routeOf = (tool: ToolName): string => `tool ${tool}`;

const idempotencyKey = z
  .string()
  .min(1)
  .max(255)
  .optional()
  .describe('Wie der Header Idempotency-Key der REST-Routen: derselbe Schlüssel mit denselben Argumenten liefert die gespeicherte Antwort und wird nicht erneut berechnet; mit anderen Argumenten wird er abgelehnt.');

const id = (what: string) => z.string().min(1).max(200).describe(what);

type JsonRpcMessage = { jsonrpc?: string; id?: string | number | null; method?: string; params?: { name?: unknown } };

/**
 * The agent plane (spec 4.5): an MCP server over Streamable HTTP at `{base_url}/mcp`, stateless (a server per
 * request, JSON responses), behind the same resource guard as the REST routes. Tools call the same core
 * operations as the REST routes: one implementation, two adapters.
 */
export function registerMcpRoute(app: FastifyInstance, core: Core, allowlist: Allowlist, plane: AgentPlane, onServerError: (error: Error) => void = () => undefined): void {
  // Any valid agent token opens the plane; each tool then needs its own scope. The 401 challenge names `ask`, the minimal scope.
  const guard = async (request: FastifyRequest) => {
    request.access = await core.authenticate(request.headers.authorization, null, 'ask');
  };

  app.route({
    // Every method reaches the guard, so any request without a token gets the 401 challenge (STANDARDS: /mcp, every method).
    method: ['GET', 'POST', 'DELETE', 'PUT', 'PATCH'],
    url: '/mcp',
    onRequest: guard,
    handler: async (request, reply) => {
      if (request.method !== 'POST') {
        // MCP Streamable HTTP: a server without a standalone event stream or sessions answers 405.
        return reply.code(405).header('allow', 'POST').type('application/json').send({ jsonrpc: '2.0', id: null, error: { code: -32000, message: 'Method not allowed: this MCP server is stateless and answers POST only' } });
      }
      const access = request.access!;
      if (Array.isArray(request.body)) {
        // JSON-RPC batches left MCP with protocol version 2025-06-18; refused whole, before any call counts.
        return reply.code(400).type('application/json').send({ jsonrpc: '2.0', id: null, error: { code: -32600, message: 'Invalid Request: JSON-RPC batches are not supported; send one message per POST' } });
      }
      const refusal = checkToolCalls(request.body, access, allowlist, core, reply);
      if (refusal) return reply.type('application/json').send(refusal);

      reply.hijack();
      const server = buildServer(access, allowlist, plane, onServerError);
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      reply.raw.once('close', () => {
        void transport.close();
        void server.close();
      });
      for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) reply.raw.setHeader(name, value as string);
      await server.connect(transport);
      await transport.handleRequest(request.raw, reply.raw, request.body);
    },
  });
}

/**
 * Before the MCP server sees a tools/call: the tool's scope (403 `insufficient_scope` naming it, as the MCP
 * authorization spec asks), the grant's rate limit (429), and retired tools (refused by name).
 */
function checkToolCalls(body: unknown, access: AccessContext, allowlist: Allowlist, core: Core, reply: FastifyReply): object | undefined {
  const message = body as JsonRpcMessage;
  if (message?.method !== 'tools/call') return undefined;
  const name = typeof message.params?.name === 'string' ? message.params.name : '';
  if (RETIRED_TOOLS.includes(name)) {
    return { jsonrpc: '2.0', id: message.id ?? null, error: { code: -32602, message: `tool "${name}" was retired for agent tokens (spec 4.4 rule 6, 9); read through the "ask" tool` } };
  }
  const scope = (TOOL_SCOPES as Record<string, string>)[name];
  if (!scope) return undefined; // unknown: the MCP server answers "not found"
  if (!access.scopes.includes(scope)) throw new BearerError(403, 'insufficient_scope', `the tool "${name}" needs scope "${scope}"`, scope);
  try {
    setRateLimitHeaders(reply, allowlist.rateLimit(access, 'POST /mcp'));
  } catch (e) {
    if (e instanceof RateLimitedError) core.events.emit('rate_limit.exceeded', { client_id: access.client_id, grant_id: access.grant.id, route: routeOf(name as ToolName) });
    throw e;
  }
  return undefined;
}

/** `_meta` key of a tool result that names what it varied (--vary-unspecified): the MCP twin of the Agent-Access-Variant header. */
export const VARIANT_META = 'agent-access/variant';

/** What a tool answers: the body, and with --vary-unspecified what it varied. */
interface ToolAnswer {
  body: unknown;
  variant?: string;
}

/** A tool result from a core operation's answer: the JSON as structured content, the German answer (or the JSON) as text. */
function toolResult({ body, variant }: ToolAnswer, isError = false): CallToolResult {
  const structured = (typeof body === 'object' && body !== null ? body : { value: body }) as Record<string, unknown>;
  const text = typeof structured.answer === 'string' ? structured.answer : JSON.stringify(structured, null, 2);
  return { content: [{ type: 'text', text }], structuredContent: structured, ...(isError ? { isError: true } : {}), ...(variant ? { _meta: { [VARIANT_META]: variant } } : {}) };
}

/**
 * Expected refusals (not found, conflicts, bad input) become tool errors the agent can read. Anything else is a
 * bug: its details go to the server's error log, the agent gets a generic tool error (as a REST 500 would).
 */
async function run(operation: () => Promise<ToolAnswer>, onServerError: (error: Error) => void): Promise<CallToolResult> {
  try {
    return toolResult(await operation());
  } catch (e) {
    if (e instanceof ProblemError) return toolResult({ body: { error: e.code, detail: e.message, status: e.status } }, true);
    onServerError(e instanceof Error ? e : new Error(String(e)));
    return toolResult({ body: { error: 'internal_error', detail: 'the tool failed inside the emulator; see its log', status: 500 } }, true);
  }
}

function buildServer(access: AccessContext, allowlist: Allowlist, plane: AgentPlane, onServerError: (error: Error) => void): McpServer {
  const server = new McpServer({ name: 'agent-access', version: '1' }, { capabilities: { tools: {} }, instructions: 'Agent Access Service (Emulator). Antworten auf Deutsch. Änderungen am Arbeitsbereich nur mit workspace.write und nach Freigabe durch die Person.' });

  /** The same idempotency, charges and commit as the REST routes; the arguments (without the key) are the body. */
  const idempotent = (tool: ToolName, key: string | undefined, args: Record<string, unknown>, operation: () => Promise<OperationResult>) =>
    run(async () => {
      const { response } = await allowlist.idempotent(access, routeOf(tool), key, JSON.stringify(args), operation);
      return { body: JSON.parse(response.body) as unknown, variant: response.variant };
    }, onServerError);
  /** An operation without idempotency (a read, continue_ask): its body and variant as they come. */
  const direct = (operation: () => Promise<OperationResult>) => run(operation, onServerError);
  const question = (q: string): string => {
    if (q.trim() === '') throw new ProblemError(400, 'invalid_request', 'question must not be empty');
    return q;
  };

  server.registerTool(
    'ask',
    {
      title: 'Frage stellen',
      description:
        'Stellt eine Frage zum Arbeitsbereich und zur Wissensdatenbank der Person und antwortet auf Deutsch mit den verwendeten Quellen. ' +
        'Mit der Berechtigung workspace.write bereitet eine Bitte um eine Änderung (anlegen oder ändern eines Kontakts, einer Aufgabe, eines Briefs …) genau eine Aktion vor: ' +
        'sie ändert noch nichts, bis die Person sie freigibt; danach führt continue_ask sie aus. Ohne idempotency_key wird jeder Aufruf berechnet (AKh).',
      inputSchema: { question: z.string().max(4000).describe('Die Frage oder Bitte, auf Deutsch'), idempotency_key: idempotencyKey },
      annotations: { readOnlyHint: false, idempotentHint: false, openWorldHint: false },
    },
    async ({ question: q, idempotency_key }) => idempotent('ask', idempotency_key, { question: q }, () => plane.ask(access, question(q))),
  );

  server.registerTool(
    'continue_ask',
    {
      title: 'Freigegebene Aktion ausführen',
      description:
        'Setzt eine von ask vorbereitete Aktion fort: meldet, dass sie noch auf die Freigabe wartet, dass die Person sie abgelehnt hat, oder führt die freigegebene Änderung aus (genau einmal) und antwortet auf Deutsch. Kostenlos.',
      inputSchema: { action_id: id('Die action_id aus der Antwort von ask') },
      annotations: { readOnlyHint: false, idempotentHint: true, openWorldHint: false },
    },
    async ({ action_id }) => direct(() => plane.continueAsk(access, action_id)),
  );

  server.registerTool(
    'start_research',
    {
      title: 'Recherche starten',
      description: 'Startet eine Recherche in der Wissensdatenbank (liest keine Arbeitsbereichsdaten) und antwortet sofort mit job_id und Status queued; das Ergebnis holt get_research. Kostet AKh, einmal pro Auftrag.',
      inputSchema: { question: z.string().max(4000).describe('Die Recherchefrage, auf Deutsch'), idempotency_key: idempotencyKey },
      annotations: { readOnlyHint: false, idempotentHint: false, openWorldHint: false },
    },
    async ({ question: q, idempotency_key }) => idempotent('start_research', idempotency_key, { question: q }, () => allowlist.startResearch(access, question(q))),
  );

  server.registerTool(
    'get_research',
    {
      title: 'Recherche abfragen',
      description: 'Liest den Stand einer Recherche: status (queued bei Annahme, succeeded wenn fertig, dazwischen und bei einem Fehler andere Werte); bei succeeded mit report und citations, bei einem Fehler mit error. Kostenlos.',
      inputSchema: { job_id: id('Die job_id von start_research') },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async ({ job_id }) => direct(() => allowlist.researchView(access, job_id)),
  );

  server.registerTool(
    'add_training_document',
    {
      title: 'Dokument zur Wissensdatenbank hinzufügen',
      description: 'Nimmt ein Textdokument (z. B. Markdown) für die Wissensdatenbank an. Es wird asynchron verarbeitet (processing_step) und ist erst nach der Indexierung auffindbar. Kostenlos.',
      inputSchema: {
        file_name: z.string().min(1).max(255).describe('Dateiname, z. B. hausordnung.md'),
        content: z.string().describe('Der Text des Dokuments'),
        idempotency_key: idempotencyKey,
      },
      annotations: { readOnlyHint: false, idempotentHint: false, openWorldHint: false },
    },
    async ({ file_name, content, idempotency_key }) => idempotent('add_training_document', idempotency_key, { file_name, content }, () => allowlist.startTraining(access, file_name, content)),
  );

  server.registerTool(
    'get_training_document',
    {
      title: 'Verarbeitungsstand abfragen',
      description: 'Liest den Stand eines hinzugefügten Dokuments, vor allem processing_step (der Verarbeitungsschritt; die Werte sind nicht festgelegt).',
      inputSchema: { document_id: id('Die document_id von add_training_document') },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async ({ document_id }) => direct(() => allowlist.trainingView(access, document_id)),
  );

  server.registerTool(
    'get_training_document_url',
    {
      title: 'Link zum Dokument',
      description: 'Gibt den Link zurück, unter dem die Person das Dokument im Browser öffnen kann.',
      inputSchema: { document_id: id('Die document_id von add_training_document') },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async ({ document_id }) => direct(() => allowlist.trainingUrl(access, document_id)),
  );

  return server;
}
