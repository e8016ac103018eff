import type { FastifyInstance, FastifyReply } from 'fastify';
import type { AgentPlane } from '../core/agent-plane.js';
import type { Core } from '../core/core.js';
import type { AccessContext } from '../core/resource-guard.js';
import type { ResourceService } from '../core/resource-service.js';
import { RETIRED_TOOLS, TOOL_SCOPES, routeOf, type ToolName } from './mcp-tools.js';
import { requireScope } from './resource-guard.js';
import { setRateLimitHeaders } from './rest-routes.js';

/**
 * The MCP SDK and zod weigh more than the rest of the server: loaded on the first /mcp request, so `serve` is
 * ready sooner (the ready-time targets of README "Benchmark"), and never for a run that does not use the agent plane.
 */
let mcpServerModule: Promise<typeof import('./mcp-server.js')> | undefined;
const loadMcpServer = () =>
  (mcpServerModule ??= import('./mcp-server.js').catch((e: unknown) => {
    // Not remembered: the next request tries again.
    mcpServerModule = undefined;
    throw e;
  }));

type JsonRpcMessage = { jsonrpc?: string; id?: string | number | null; method?: string; params?: { name?: unknown } };

/**
 * The agent plane (spec 4.5): an MCP server over Streamable HTTP at `{base_url}/mcp`, stateless (a server per
 * request, JSON responses), behind the same resource guard as the REST routes. Tools call the same core
 * operations as the REST routes: one implementation, two adapters.
 */
export function registerMcpRoute(
  app: FastifyInstance,
  core: Core,
  resources: ResourceService,
  plane: AgentPlane,
  onServerError: (error: Error) => void = () => undefined,
): void {
  // The import starts while the token is checked; a failed import surfaces in the handler, which awaits it.
  const preload = async () => void loadMcpServer().catch(() => undefined);

  app.route({
    // Every method reaches the guard, so any request without a token gets the 401 challenge (spec 5 rule 5; RFC 9728 §5.1,
    // https://www.rfc-editor.org/rfc/rfc9728#section-5.1: the challenge is where a client starts discovery, whatever it sent).
    method: ['GET', 'POST', 'DELETE', 'PUT', 'PATCH'],
    url: '/mcp',
    // Any valid agent token opens the plane; each tool then needs its own scope. The 401 challenge names `ask`, the minimal scope.
    onRequest: [preload, requireScope(core, null, 'ask')],
    handler: async (request, reply) => {
      if (request.method !== 'POST') {
        // MCP Streamable HTTP: a server without a standalone event stream or sessions answers 405.
        return reply
          .code(405)
          .header('allow', 'POST')
          .type('application/json')
          .send({
            jsonrpc: '2.0',
            id: null,
            error: { code: -32000, message: 'Method not allowed: this MCP server is stateless and answers POST only' },
          });
      }
      const access = request.access!;
      if (Array.isArray(request.body)) {
        // JSON-RPC batches left MCP with protocol version 2025-06-18; refused whole, before any call counts.
        return reply
          .code(400)
          .type('application/json')
          .send({
            jsonrpc: '2.0',
            id: null,
            error: { code: -32600, message: 'Invalid Request: JSON-RPC batches are not supported; send one message per POST' },
          });
      }
      const refusal = checkToolCalls(request.body, access, resources, reply);
      if (refusal) return reply.type('application/json').send(refusal);

      const { buildServer, StreamableHTTPServerTransport } = await loadMcpServer();
      reply.hijack();
      const server = buildServer(access, resources, plane, onServerError);
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      reply.raw.once('close', () => {
        void transport.close();
        void server.close();
      });
      for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) reply.raw.setHeader(name, value);
      await server.connect(transport);
      await transport.handleRequest(request.raw, reply.raw, request.body);
    },
  });
}

/**
 * Before the MCP server sees a tools/call: the tool's scope (403 `insufficient_scope` naming it, as the MCP
 * authorization spec asks), the grant's rate limit (429), and retired tools (refused by name).
 */
function checkToolCalls(body: unknown, access: AccessContext, resources: ResourceService, reply: FastifyReply): object | undefined {
  const message = body as JsonRpcMessage;
  if (message?.method !== 'tools/call') return undefined;
  const name = typeof message.params?.name === 'string' ? message.params.name : '';
  if (RETIRED_TOOLS.includes(name)) {
    return {
      jsonrpc: '2.0',
      id: message.id ?? null,
      error: { code: -32602, message: `tool "${name}" was retired for agent tokens (spec 4.4 rule 6, 9); read through the "ask" tool` },
    };
  }
  const scope = (TOOL_SCOPES as Record<string, string>)[name];
  if (!scope) return undefined; // unknown: the MCP server answers "not found"
  setRateLimitHeaders(
    reply,
    resources.meter.admit(access, { scope, needs: `the tool "${name}"`, route: 'POST /mcp', meter: routeOf(name as ToolName) }),
  );
  return undefined;
}
