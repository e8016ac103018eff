import { toolMeter } from '../core/state/idempotency.js';
import { WORKSPACE_KINDS } from '../core/resources/workspace.js';

// What the agent plane's route (./mcp.ts) and its lazily loaded MCP server (./mcp-server.ts) both name.

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

/** What request faults (rate_limit, drop_response) match a tool call as: its HTTP request. */
export const TOOL_CALL_ROUTE = 'POST /mcp';

/** Charges, idempotency keys and rate-limit events of a tool are kept under this route name. */
export const routeOf = (tool: ToolName): string => toolMeter(tool);

/** `_meta` key of a tool result that names what it varied (--vary-unspecified): the MCP twin of the Agent-Access-Variant header. */
export const VARIANT_META = 'agent-access/variant';
