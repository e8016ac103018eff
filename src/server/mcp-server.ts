import {
  McpServer,
  WebStandardStreamableHTTPServerTransport,
  createMcpHandler,
  isLegacyRequest,
  type AuthInfo,
  type CallToolResult,
} from '@modelcontextprotocol/server';
import { z } from 'zod';
import type { AgentPlane } from '../core/resources/agent-plane.js';
import { ProblemError } from '../core/state/errors.js';
import { IDEMPOTENCY_KEY } from '../core/state/idempotency.js';
import { CONTENT, FILE_NAME, QUESTION, RESOURCE_ID, type InputSchema } from '../core/state/inputs.js';
import type { Answer, Charged } from '../core/resources/metering.js';
import type { AccessContext } from '../core/oauth/resource-guard.js';
import type { ResourceService } from '../core/resources/resource-service.js';
import { routeOf, TOOL_CALL_ROUTE, VARIANT_META, type ToolName } from './mcp-tools.js';

// The agent plane's MCP server: the tools and their schemas. Loaded lazily by ./mcp.ts, which owns the route.

/**
 * A tool argument's zod schema from the input's one definition (src/core/state/inputs.ts), which fastify validates the
 * REST twin's field with: the same type, bounds and pattern, whichever door the input comes through.
 */
function zodString(input: Extract<InputSchema, { type: 'string' }>, description: string) {
  let schema = z.string();
  if (input.minLength !== undefined) schema = schema.min(input.minLength);
  if (input.maxLength !== undefined) schema = schema.max(input.maxLength);
  if (input.pattern !== undefined) schema = schema.regex(new RegExp(input.pattern, 'u'));
  return schema.describe(description);
}

const idempotencyKey = zodString(
  IDEMPOTENCY_KEY,
  'Wie der Header Idempotency-Key der REST-Routen: derselbe Schlüssel mit denselben Argumenten liefert die gespeicherte Antwort und ' +
    'wird nicht erneut berechnet; mit anderen Argumenten wird er abgelehnt.',
).optional();

const id = (what: string) => zodString(RESOURCE_ID, what);

/** A tool result from a core operation's answer: the JSON as structured content, the German answer (or the JSON) as text. */
function toolResult({ value, variant }: Answer<unknown>, isError = false): CallToolResult {
  const structured = (typeof value === 'object' && value !== null ? value : { value }) as Record<string, unknown>;
  const text = typeof structured.answer === 'string' ? structured.answer : JSON.stringify(structured, null, 2);
  return {
    content: [{ type: 'text', text }],
    structuredContent: structured,
    ...(isError ? { isError: true } : {}),
    ...(variant ? { _meta: { [VARIANT_META]: variant } } : {}),
  };
}

/**
 * Refusals (not found, conflicts, bad input) become tool errors the agent can read, with the status their REST twin
 * answers. Anything else is a bug: its details go to the server's error log, the agent gets a generic tool error
 * (as a REST 500 would).
 */
async function run(operation: () => Promise<Answer<unknown>>, onServerError: (error: Error) => void): Promise<CallToolResult> {
  try {
    return toolResult(await operation());
  } catch (e) {
    if (e instanceof ProblemError)
      return toolResult({ value: { error: e.code, detail: e.message, status: e.status, ...(e.hint ? { hint: e.hint } : {}) } }, true);
    onServerError(e instanceof Error ? e : new Error(String(e)));
    return toolResult({ value: { error: 'server_error', detail: 'the tool failed inside the emulator; see its log', status: 500 } }, true);
  }
}

export function buildServer(
  access: AccessContext,
  resources: ResourceService,
  plane: AgentPlane,
  onServerError: (error: Error) => void,
  loseAnswer: () => void,
): McpServer {
  const server = new McpServer(
    { name: 'agent-access', version: '1' },
    {
      capabilities: { tools: {} },
      instructions:
        'Agent Access Service (Emulator). Antworten auf Deutsch. Änderungen am Arbeitsbereich nur mit workspace.write und nach Freigabe durch die Person.',
    },
  );

  /**
   * The metered call of the REST routes (idempotency, charges, commit); the arguments (without the key) are the body.
   * An answer a drop_response fault hits is never sent: the connection closes first.
   */
  const metered = (tool: ToolName, key: string | undefined, args: Record<string, unknown>, operation: () => Promise<Charged<unknown>>) =>
    run(async () => {
      const answer = await resources.meter.run(
        access,
        { meter: routeOf(tool), route: TOOL_CALL_ROUTE, key, body: JSON.stringify(args) },
        operation,
      );
      if (answer.lost) loseAnswer();
      return answer;
    }, onServerError);
  /** An operation without idempotency (a read, continue_ask): its answer as it comes. */
  const direct = (operation: () => Promise<Answer<unknown>>) => run(operation, onServerError);

  server.registerTool(
    'ask',
    {
      title: 'Frage stellen',
      description:
        'Stellt eine Frage zum Arbeitsbereich und zur Wissensdatenbank der Person und antwortet auf Deutsch mit den verwendeten Quellen. ' +
        'Mit der Berechtigung workspace.write bereitet eine Bitte um eine Änderung (anlegen oder ändern eines Kontakts, einer Aufgabe, ' +
        'eines Briefs …) genau eine Aktion vor: ' +
        'sie ändert noch nichts, bis die Person sie freigibt; danach führt continue_ask sie aus. Ohne idempotency_key wird jeder Aufruf berechnet (AKh).',
      inputSchema: z.object({ question: zodString(QUESTION, 'Die Frage oder Bitte, auf Deutsch'), idempotency_key: idempotencyKey }),
      annotations: { readOnlyHint: false, idempotentHint: false, openWorldHint: false },
    },
    async ({ question, idempotency_key }) => metered('ask', idempotency_key, { question }, () => plane.ask(access, question)),
  );

  server.registerTool(
    'continue_ask',
    {
      title: 'Freigegebene Aktion ausführen',
      description:
        'Setzt eine von ask vorbereitete Aktion fort: meldet, dass sie noch auf die Freigabe wartet, dass die Person sie abgelehnt ' +
        'hat, oder führt die freigegebene Änderung aus (genau einmal) und antwortet auf Deutsch. Kostenlos.',
      inputSchema: z.object({ action_id: id('Die action_id aus der Antwort von ask') }),
      annotations: { readOnlyHint: false, idempotentHint: true, openWorldHint: false },
    },
    async ({ action_id }) => direct(() => plane.continueAsk(access, action_id)),
  );

  server.registerTool(
    'start_research',
    {
      title: 'Recherche starten',
      description:
        'Startet eine Recherche in der Wissensdatenbank (liest keine Arbeitsbereichsdaten) und antwortet sofort mit job_id und Status ' +
        'queued; das Ergebnis holt get_research. Kostet AKh, einmal pro Auftrag.',
      inputSchema: z.object({ question: zodString(QUESTION, 'Die Recherchefrage, auf Deutsch'), idempotency_key: idempotencyKey }),
      annotations: { readOnlyHint: false, idempotentHint: false, openWorldHint: false },
    },
    async ({ question, idempotency_key }) =>
      metered('start_research', idempotency_key, { question }, () => resources.startResearch(access, question)),
  );

  server.registerTool(
    'get_research',
    {
      title: 'Recherche abfragen',
      description:
        'Liest den Stand einer Recherche: status (queued bei Annahme, succeeded wenn fertig, dazwischen und bei einem Fehler andere ' +
        'Werte); bei succeeded mit report und citations, bei einem Fehler mit error. Kostenlos.',
      inputSchema: z.object({ job_id: id('Die job_id von start_research') }),
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async ({ job_id }) => direct(() => resources.researchView(access, job_id)),
  );

  server.registerTool(
    'add_training_document',
    {
      title: 'Dokument zur Wissensdatenbank hinzufügen',
      description:
        'Nimmt ein Textdokument (z. B. Markdown) für die Wissensdatenbank an. Es wird asynchron verarbeitet (processing_step) und ist ' +
        'erst nach der Indexierung auffindbar. Kostenlos.',
      inputSchema: z.object({
        file_name: zodString(FILE_NAME, 'Dateiname, z. B. hausordnung.md'),
        content: zodString(CONTENT, 'Der Text des Dokuments'),
        idempotency_key: idempotencyKey,
      }),
      annotations: { readOnlyHint: false, idempotentHint: false, openWorldHint: false },
    },
    async ({ file_name, content, idempotency_key }) =>
      metered('add_training_document', idempotency_key, { file_name, content }, () => resources.startTraining(access, file_name, content)),
  );

  server.registerTool(
    'get_training_document',
    {
      title: 'Verarbeitungsstand abfragen',
      description:
        'Liest den Stand eines hinzugefügten Dokuments, vor allem processing_step (der Verarbeitungsschritt; die Werte sind nicht festgelegt).',
      inputSchema: z.object({ document_id: id('Die document_id von add_training_document') }),
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async ({ document_id }) => direct(() => resources.trainingView(access, document_id)),
  );

  server.registerTool(
    'get_training_document_url',
    {
      title: 'Link zum Dokument',
      description: 'Gibt den Link zurück, unter dem die Person das Dokument im Browser öffnen kann.',
      inputSchema: z.object({ document_id: id('Die document_id von add_training_document') }),
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async ({ document_id }) => direct(() => resources.trainingUrl(access, document_id)),
  );

  return server;
}

/**
 * One MCP endpoint for every protocol version current clients send: MCP 2026-07-28, where each request carries its
 * version and capabilities, through the SDK's per-request handler; and the 2025 revisions with their `initialize`
 * handshake, served statelessly, each request by a server of its own, answering JSON as before (the SDK's own legacy
 * fallback answers with event streams). The SDK tells them apart; both build their server from the one definition
 * above, so the versions cannot drift.
 */
export function buildHandler(resources: ResourceService, plane: AgentPlane, onServerError: (error: Error) => void) {
  const modern = createMcpHandler(
    (ctx) => {
      const { access, loseAnswer } = ctx.authInfo?.extra as unknown as PlaneRequest;
      return buildServer(access, resources, plane, onServerError, loseAnswer);
    },
    { legacy: 'reject', onerror: () => undefined },
  );
  /** `loseAnswer`: what a drop_response fault does to this request's connection (emulator control). */
  return async (request: Request, access: AccessContext, parsedBody: unknown, loseAnswer: () => void): Promise<Response> => {
    const extra: PlaneRequest = { access, loseAnswer };
    const authInfo: AuthInfo = { token: '', clientId: access.grant.client_id, scopes: [...access.grant.scopes], extra: { ...extra } };
    if (!(await isLegacyRequest(request, parsedBody))) return modern.fetch(request, { authInfo, parsedBody });
    const server = buildServer(access, resources, plane, onServerError, loseAnswer);
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    await server.connect(transport);
    try {
      return await transport.handleRequest(request, { authInfo, parsedBody });
    } finally {
      void server.close();
    }
  };
}

/** What the route hands the SDK's handler with each request (as `authInfo.extra`), for the server it builds for it. */
interface PlaneRequest {
  access: AccessContext;
  loseAnswer: () => void;
}
