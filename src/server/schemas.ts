/** Route schemas: every input is validated by fastify before a handler runs; responses are serialised by them. */
import { AUTHORIZE_PARAMETERS } from '../core/oauth/authorize.js';
import { ADMIN_PAGE } from '../protocol/admin-api.js';
import { FAULT_FIELDS } from '../core/emulation/fault-spec.js';
import { CONTENT, FILE_NAME, QUESTION, RESOURCE_ID } from '../core/state/inputs.js';
import { SNAPSHOT_NAME } from '../store/snapshot-store.js';

const str = (maxLength = 4096) => ({ type: 'string', maxLength }) as const;

export const oauthErrorSchema = {
  type: 'object',
  required: ['error'],
  properties: { error: { type: 'string' }, error_description: { type: 'string' } },
} as const;

export const problemSchema = {
  type: 'object',
  required: ['type', 'title', 'status'],
  properties: { type: { type: 'string' }, title: { type: 'string' }, status: { type: 'integer' }, detail: { type: 'string' } },
  additionalProperties: true,
} as const;

const openObject = { type: 'object', additionalProperties: true } as const;

/** Spec 2.1 / RFC 7591 §2. Unknown fields pass through and are ignored by the core. */
export const registerSchema = {
  body: {
    type: 'object',
    required: ['client_name', 'redirect_uris', 'grant_types', 'response_types', 'token_endpoint_auth_method'],
    properties: {
      client_name: str(200),
      redirect_uris: { type: 'array', minItems: 1, maxItems: 20, items: str(2000) },
      grant_types: { type: 'array', minItems: 1, maxItems: 10, items: str(100) },
      response_types: { type: 'array', minItems: 1, maxItems: 10, items: str(100) },
      token_endpoint_auth_method: str(100),
      application_type: str(100),
    },
    additionalProperties: true,
  },
  response: {
    201: {
      type: 'object',
      properties: {
        client_id: { type: 'string' },
        client_id_issued_at: { type: 'integer' },
        client_name: { type: 'string' },
        redirect_uris: { type: 'array', items: { type: 'string' } },
        grant_types: { type: 'array', items: { type: 'string' } },
        response_types: { type: 'array', items: { type: 'string' } },
        token_endpoint_auth_method: { type: 'string' },
        application_type: { type: 'string' },
      },
    },
    '4xx': oauthErrorSchema,
  },
} as const;

const formField = str();

/** OAuth 2.1 §4.1.3 / §4.3.1: the token request, form-encoded. A repeated parameter arrives as an array and is refused. */
export const tokenSchema = {
  body: {
    type: 'object',
    required: ['grant_type'],
    properties: {
      grant_type: str(100),
      client_id: formField,
      code: formField,
      redirect_uri: formField,
      code_verifier: formField,
      refresh_token: formField,
      scope: formField,
      resource: formField,
    },
    additionalProperties: true,
  },
  response: {
    200: {
      type: 'object',
      // No refresh_token for a client registered without the refresh_token grant (RFC 6749 §5.1).
      required: ['access_token', 'token_type', 'expires_in', 'scope'],
      properties: {
        access_token: { type: 'string' },
        token_type: { type: 'string' },
        expires_in: { type: 'integer' },
        refresh_token: { type: 'string' },
        scope: { type: 'string' },
      },
    },
    '4xx': oauthErrorSchema,
    '5xx': oauthErrorSchema,
  },
} as const;

/** RFC 7009 §2.1. */
export const revokeSchema = {
  body: {
    type: 'object',
    required: ['token'],
    properties: { token: formField, token_type_hint: str(100), client_id: formField },
    additionalProperties: true,
  },
  response: { '4xx': oauthErrorSchema },
} as const;

const queryValue = { anyOf: [str(), { type: 'array', maxItems: 10, items: str() }] } as const;

/** Spec 4.2. Values may repeat here so the core can answer a repeated parameter as OAuth 2.1 asks. */
export const authorizeSchema = {
  querystring: {
    type: 'object',
    properties: Object.fromEntries([...AUTHORIZE_PARAMETERS, 'login_hint'].map((k) => [k, queryValue])),
    additionalProperties: true,
  },
} as const;

/**
 * A consent screen's ticket: the authorization request signed (core/oauth/consent-screens.ts). The request target is at most
 * 8 KiB; its parameters as JSON in base64url stay well under this.
 */
const CONSENT_TICKET_LIMIT = 32 * 1024;

export const consentSchema = {
  body: {
    type: 'object',
    required: ['interaction', 'csrf', 'decision'],
    properties: { interaction: str(CONSENT_TICKET_LIMIT), csrf: str(200), decision: { type: 'string', enum: ['approve', 'deny'] } },
    additionalProperties: false,
  },
} as const;

/** The settings page: `page` of the person's grants (SETTINGS_PAGE_SIZE each); `revoked` says a revocation just happened. */
export const settingsSchema = {
  querystring: {
    type: 'object',
    // Query values are strings (no coercion): a page number is digits, 1 to 999999.
    properties: { page: { type: 'string', pattern: '^[1-9][0-9]{0,5}$' }, revoked: str(200) },
    additionalProperties: true,
  },
} as const;

export const settingsRevokeSchema = {
  params: { type: 'object', required: ['id'], properties: { id: str(200) } },
  body: { type: 'object', required: ['csrf'], properties: { csrf: str(200) }, additionalProperties: false },
} as const;

export const actionDecisionSchema = {
  params: { type: 'object', required: ['id'], properties: { id: str(200) } },
  body: {
    type: 'object',
    required: ['csrf', 'decision'],
    properties: { csrf: str(200), decision: { type: 'string', enum: ['approve', 'reject'] } },
    additionalProperties: false,
  },
} as const;

const grantView = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    client_id: { type: 'string' },
    client_name: { type: 'string' },
    person_id: { type: 'string' },
    scopes: { type: 'array', items: { type: 'string' } },
    resource: { type: ['string', 'null'] },
    created_at: { type: 'integer' },
    last_used_at: { type: ['integer', 'null'] },
    status: { type: 'string' },
    revoked_at: { type: 'integer' },
    revoked_by: { type: 'string' },
    families: { type: 'array', items: openObject },
  },
} as const;

/** `limit` and `offset` of a paged admin list (ADMIN_PAGE): digits, as query values come (no coercion). */
const paging = {
  limit: { type: 'string', pattern: `^[1-9][0-9]{0,${String(ADMIN_PAGE.max).length - 1}}$` },
  offset: { type: 'string', pattern: '^[0-9]{1,9}$' },
} as const;
const pageFields = {
  total: { type: 'integer' },
  offset: { type: 'integer' },
  limit: { type: 'integer' },
  next: { type: ['string', 'null'] },
} as const;

export const adminGrantsSchema = {
  querystring: { type: 'object', properties: { person_id: str(200), client_id: str(200), ...paging }, additionalProperties: false },
  response: {
    200: { type: 'object', properties: { grants: { type: 'array', items: grantView }, ...pageFields } },
    '4xx': problemSchema,
  },
} as const;

export const adminFindingsSchema = {
  querystring: { type: 'object', properties: paging, additionalProperties: false },
  response: {
    200: { type: 'object', properties: { findings: { type: 'array', items: openObject }, ...pageFields } },
    '4xx': problemSchema,
  },
} as const;

export const adminRevokeSchema = {
  params: { type: 'object', required: ['id'], properties: { id: str(200) } },
  // `?by=person`: a scripted person action, recorded as the person's own revocation in settings (POST without a body).
  querystring: { type: 'object', properties: { by: { type: 'string', enum: ['person', 'admin'] } }, additionalProperties: false },
  response: { 200: { type: 'object', properties: { grant: grantView } }, '4xx': problemSchema },
} as const;

export const adminAdvanceSchema = {
  body: {
    type: 'object',
    required: ['by'],
    properties: {
      by: {
        anyOf: [
          { type: 'string', minLength: 1, maxLength: 40 },
          { type: 'number', minimum: 0, maximum: 3_153_600_000_000 },
        ],
      },
    },
    additionalProperties: false,
  },
} as const;

export const adminTokensSchema = {
  body: {
    type: 'object',
    required: ['scopes'],
    properties: {
      scopes: { type: 'array', minItems: 1, maxItems: 20, items: { type: 'string', minLength: 1, maxLength: 100 } },
      identity: { type: 'boolean' },
      client_id: str(200),
      client_name: str(200),
      person_id: str(200),
    },
    additionalProperties: false,
  },
} as const;

export const adminConsentSchema = {
  body: {
    type: 'object',
    required: ['decision'],
    properties: {
      decision: { type: 'string', enum: ['page', 'approve', 'deny'] },
      scopes: { type: 'array', maxItems: 20, items: { type: 'string', minLength: 1, maxLength: 100 } },
      client_id: str(200),
    },
    additionalProperties: false,
  },
} as const;

/** A fault spec: its fields as src/core/emulation/fault-spec.ts defines them, which also checks the flag form and the programmatic API. */
export const adminFaultSchema = {
  body: { type: 'object', required: ['kind'], properties: FAULT_FIELDS, additionalProperties: false },
} as const;

export const adminFaultIdSchema = {
  params: { type: 'object', required: ['id'], properties: { id: str(100) } },
} as const;

export const adminActionsSchema = {
  querystring: {
    type: 'object',
    properties: { status: { type: 'string', enum: ['pending', 'approved', 'rejected', 'applied'] } },
    additionalProperties: false,
  },
} as const;

const snapshotInfo = {
  type: 'object',
  properties: {
    name: { type: 'string' },
    saved_at: { type: 'string' },
    clock: { type: 'object', properties: { mode: { type: 'string' }, now: { type: 'number' }, iso: { type: 'string' } } },
    state_sha256: { type: 'string' },
    ledger_sha256: { type: ['string', 'null'] },
    charges: { type: 'integer' },
    file: { type: ['string', 'null'] },
  },
} as const;

/** A snapshot name in the path: a safe file name, never a path. */
const snapshotParams = {
  type: 'object',
  required: ['name'],
  properties: { name: { type: 'string', pattern: SNAPSHOT_NAME.source } },
  additionalProperties: false,
} as const;

export const adminSnapshotSaveSchema = {
  params: snapshotParams,
  response: { 201: snapshotInfo, '4xx': problemSchema },
} as const;

export const adminSnapshotRestoreSchema = {
  params: snapshotParams,
  response: { 200: snapshotInfo, '4xx': problemSchema },
} as const;

export const adminResetSchema = {
  response: { 200: snapshotInfo, '4xx': problemSchema },
} as const;

export const adminSnapshotListSchema = {
  response: {
    200: {
      type: 'object',
      properties: {
        snapshots: { type: 'array', items: snapshotInfo },
        baseline: { anyOf: [{ type: 'null' }, snapshotInfo] },
        location: { type: ['string', 'null'] },
      },
    },
    '4xx': problemSchema,
  },
} as const;

export const adminDecideSchema = {
  params: { type: 'object', required: ['id'], properties: { id: str(200) } },
  body: {
    type: 'object',
    required: ['decision'],
    properties: { decision: { type: 'string', enum: ['approve', 'reject'] } },
    additionalProperties: false,
  },
} as const;

/** Spec 4.4: POST /chat/ask. The 200 body is the stored answer, sent as the exact bytes of its first answer. */
export const askSchema = {
  body: {
    type: 'object',
    required: ['question'],
    properties: { question: QUESTION },
    additionalProperties: true,
  },
  response: { '4xx': problemSchema, '5xx': problemSchema },
} as const;

export const researchSchema = askSchema;

/** Spec 2.6: file_name and content (Markdown or plain text); the name's form and the content's size are checked by the core. */
export const trainingSchema = {
  body: {
    type: 'object',
    required: ['file_name', 'content'],
    properties: { file_name: FILE_NAME, content: CONTENT },
    additionalProperties: true,
  },
  response: { '4xx': problemSchema, '5xx': problemSchema },
} as const;

export const idParams = (name: string) =>
  ({
    params: { type: 'object', required: [name], properties: { [name]: RESOURCE_ID } },
    response: { '4xx': problemSchema },
  }) as const;
