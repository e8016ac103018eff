import { Readable } from 'node:stream';
import type { ReadableStream as NodeReadableStream } from 'node:stream/web';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AgentPlane } from '../core/resources/agent-plane.js';
import type { Core } from '../core/core.js';
import { checkScope, type AccessContext } from '../core/oauth/resource-guard.js';
import type { ResourceService } from '../core/resources/resource-service.js';
import { RETIRED_TOOLS, TOOL_CALL_ROUTE, TOOL_SCOPES, routeOf, type ToolName } from './mcp-tools.js';
import { requireScope } from './resource-guard.js';
import { setRateLimitHeaders } from './rest-routes.js';
import { INVALID_UTF8 } from './strict-json.js';
import { HEADERS_TOO_LARGE, HTTP_LIMITS, URI_TOO_LONG } from './http-transport.js';

/**
 * The MCP SDK and zod weigh more than the rest of the server, in load time and memory (docs/bench.md "A warm-up
 * request before the ready line, and the MCP SDK on demand"): they load with the first request to /mcp, which an
 * MCP client sends before it has a token (the 401 that starts its discovery), so they are there by the time it
 * comes back with one; a server no client uses over MCP never loads them. Loaded in stages (zod's core, zod, the
 * SDK's protocol types, its server, the transport), because a module graph runs in one go once loaded: a request
 * that does not need them waits at most one stage's run (longer on Node 22, whose loader reads a graph's files in
 * the same go; docs/bench.md "Start-up, first requests and memory").
 */
const MCP_STAGES = [() => import('zod/v4/core'), () => import('zod'), () => import('@modelcontextprotocol/server')];
let mcpServerModule: Promise<typeof import('./mcp-server.js')> | undefined;

const loadMcpServer = () =>
  (mcpServerModule ??= (async () => {
    for (const stage of MCP_STAGES) {
      await stage();
      await new Promise((resolve) => setImmediate(resolve));
    }
    return import('./mcp-server.js');
  })().catch((e: unknown) => {
    // Not remembered: the next request tries again.
    mcpServerModule = undefined;
    throw e;
  }));

type JsonRpcMessage = { jsonrpc?: string; id?: string | number | null; method?: string; params?: { name?: unknown } };

/** The body-parsing refusals of /mcp, in JSON-RPC's shape (-32700: not JSON; -32000: the transport's own). */
const TRANSPORT_ERRORS: Record<string, { status: number; code: number; message: string }> = {
  FST_ERR_CTP_INVALID_JSON_BODY: { status: 400, code: -32700, message: 'Parse error: the body is not valid JSON' },
  FST_ERR_CTP_EMPTY_JSON_BODY: { status: 400, code: -32700, message: 'Parse error: the body is empty' },
  [INVALID_UTF8]: { status: 400, code: -32700, message: 'Parse error: the body is not valid UTF-8' },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: {
    status: 415,
    code: -32000,
    message: 'Unsupported Media Type: Content-Type must be application/json',
  },
  FST_ERR_CTP_BODY_TOO_LARGE: { status: 413, code: -32000, message: 'Request body too large' },
  [URI_TOO_LONG]: { status: 414, code: -32000, message: `URI Too Long: the request target exceeds ${HTTP_LIMITS.target} bytes` },
  [HEADERS_TOO_LARGE]: { status: 431, code: -32000, message: `Request Header Fields Too Large: they exceed ${HTTP_LIMITS.headers} bytes` },
};

function sendTransportError(reply: FastifyReply, error: { status: number; code: number; message: string }) {
  return reply
    .code(error.status)
    .type('application/json; charset=utf-8')
    .send({ jsonrpc: '2.0', id: null, error: { code: error.code, message: error.message } });
}

const isToolCall = (body: unknown): boolean => (body as JsonRpcMessage | null)?.method === 'tools/call';

const isId = (id: unknown) => typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id));

/**
 * Why a JSON value is not a JSON-RPC 2.0 message (JSON-RPC 2.0 §4, §5; MCP: ids are strings or numbers, never null),
 * or null when it is one: a request, a notification or a response.
 */
function invalidMessage(body: unknown): string | null {
  if (typeof body !== 'object' || body === null) return 'the body must be a JSON-RPC message object';
  const message = body as Record<string, unknown>;
  if (message.jsonrpc !== '2.0') return 'jsonrpc must be "2.0"';
  if ('method' in message) {
    if (typeof message.method !== 'string') return 'method must be a string';
    if ('id' in message && !isId(message.id)) return 'id must be a string or a number';
    if ('params' in message && (typeof message.params !== 'object' || message.params === null))
      return 'params must be an object or an array';
    return null;
  }
  if (!isId(message.id)) return 'a message needs a method (a request or notification) or an id (a response)';
  if ('result' in message === 'error' in message) return 'a response has either result or error';
  return null;
}

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
  let handler: ReturnType<Awaited<ReturnType<typeof loadMcpServer>>['buildHandler']> | undefined;
  // The import starts while the token is checked; a failed import surfaces in the handler, which awaits it.
  const preload = async () => void loadMcpServer().catch(() => undefined);

  app.route({
    // Every method reaches the guard, so any request without a token gets the 401 challenge (spec 5 rule 5; RFC 9728 §5.1,
    // https://www.rfc-editor.org/rfc/rfc9728#section-5.1: the challenge is where a client starts discovery, whatever it sent).
    method: ['GET', 'POST', 'DELETE', 'PUT', 'PATCH'],
    url: '/mcp',
    // Any valid agent token opens the plane; each tool then needs its own scope. The 401 challenge names `ask`, the minimal scope.
    onRequest: [preload, requireScope(core, null, 'ask')],
    // JSON-RPC 2.0 §5.1 and the MCP transport: a body that is not JSON is a parse error (-32700) in JSON-RPC's own
    // shape, and so are the transport's media-type and size refusals. Everything else (the guard's 401 and 403, the
    // 429) is answered by the server's error handler.
    errorHandler: (error: FastifyError, _request, reply) => {
      const transport = TRANSPORT_ERRORS[error.code];
      if (!transport) throw error;
      void sendTransportError(reply, transport);
    },
    handler: async (request, reply) => {
      const access = request.access!;
      // Spec 8: every answer to a token holder reports its grant's window; a tools/call, which counts, reports it after counting.
      if (!isToolCall(request.body)) setRateLimitHeaders(reply, resources.meter.limiter.peek(access.grant.id));
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
      const type = (request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
      if (type !== 'application/json') return sendTransportError(reply, TRANSPORT_ERRORS.FST_ERR_CTP_INVALID_MEDIA_TYPE!);
      const invalid = invalidMessage(request.body);
      if (invalid)
        return reply
          .code(400)
          .type('application/json; charset=utf-8')
          .send({ jsonrpc: '2.0', id: null, error: { code: -32600, message: `Invalid Request: ${invalid}` } });
      const refusal = checkToolCalls(request.body, access, core, resources, reply);
      if (refusal) return reply.type('application/json').send(refusal);

      const { buildHandler } = await loadMcpServer();
      handler ??= buildHandler(resources, plane, onServerError);
      // The SDK ends an exchange (an open event stream) when its request is aborted: when the client goes.
      const gone = new AbortController();
      reply.raw.once('close', () => gone.abort());
      const response = await handler(webRequest(request, gone.signal), access, request.body, () => app.loseAnswer(request, reply));
      // A drop_response fault closed the connection before the answer (emulator control): nothing more to send.
      if (reply.sent) return reply;
      reply.code(response.status);
      // Its length is the body's as sent here (the id put back, withRequestId), which fastify sets itself.
      response.headers.forEach((value, name) => void (name === 'content-length' || reply.header(name, value)));
      // An event stream (a 2026-07-28 subscriptions/listen) is passed on as it comes; a JSON answer whole.
      if (!response.body || !/^application\/json/i.test(response.headers.get('content-type') ?? ''))
        // Node's web ReadableStream type, which the DOM lib's (the tests' program) already is.
        // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion
        return reply.send(response.body ? Readable.fromWeb(response.body as NodeReadableStream) : null);
      return reply.send(withRequestId(Buffer.from(await response.arrayBuffer()), request.body as JsonRpcMessage));
    },
  });
}

/**
 * JSON-RPC 2.0 §5: an error answer to a request carries the request's id; `null` only when it could not be read.
 * The SDK's 2025 transport answers an unsupported `MCP-Protocol-Version` header with `id: null` even so.
 */
function withRequestId(body: Buffer, message: JsonRpcMessage): Buffer {
  if (!isId(message.id) || !body.includes('"id":null')) return body;
  const answer = JSON.parse(body.toString()) as { id?: unknown; error?: unknown };
  if (answer.id !== null || !answer.error) return body;
  return Buffer.from(JSON.stringify({ ...answer, id: message.id }));
}

/** Headers that describe the connection or the body as sent, not the message the SDK is handed parsed. */
const HOP_HEADERS = new Set(['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'expect', 'upgrade']);

/** The request as the SDK's web-standard handler takes it; the body goes alongside, already parsed. */
function webRequest(request: FastifyRequest, signal: AbortSignal): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    if (value === undefined || HOP_HEADERS.has(name)) continue;
    for (const one of Array.isArray(value) ? value : [value]) headers.append(name, one);
  }
  return new Request(`http://${request.host}${request.url}`, { method: request.method, headers, signal });
}

/**
 * Before the MCP server sees a tools/call: the tool's scope (403 `insufficient_scope` naming it, as the MCP
 * authorization spec asks), the grant's rate limit (429), and retired tools (refused by name).
 */
function checkToolCalls(
  body: unknown,
  access: AccessContext,
  core: Core,
  resources: ResourceService,
  reply: FastifyReply,
): object | undefined {
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
  checkScope(core, access, scope, `the tool "${name}"`, TOOL_CALL_ROUTE);
  setRateLimitHeaders(reply, resources.meter.admit(access, { scope, route: TOOL_CALL_ROUTE, meter: routeOf(name as ToolName) }));
  return undefined;
}
