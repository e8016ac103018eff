import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { AgentPlane } from '../core/agent-plane.js';
import type { Allowlist, OperationResult } from '../core/allowlist.js';
import type { AccessContext } from '../core/resource-guard.js';
import { ProblemError } from '../core/errors.js';
import { routeOf, VARIANT_META, type ToolName } from './mcp.js';

// The agent plane's MCP server: the tools and their schemas. Loaded lazily by ./mcp.ts, which owns the route.
export { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';

const idempotencyKey = z
  .string()
  .min(1)
  .max(255)
  .optional()
  .describe('Wie der Header Idempotency-Key der REST-Routen: derselbe Schlüssel mit denselben Argumenten liefert die gespeicherte Antwort und wird nicht erneut berechnet; mit anderen Argumenten wird er abgelehnt.');

const id = (what: string) => z.string().min(1).max(200).describe(what);

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

export function buildServer(access: AccessContext, allowlist: Allowlist, plane: AgentPlane, onServerError: (error: Error) => void): McpServer {
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
