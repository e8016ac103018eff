import type { CoreContext } from '../../context.js';
import type { Client } from '../../state/state.js';

/** Parameters of a token request after form decoding (OAuth 2.1 §3.2.2). */
export type TokenParams = Record<string, string | undefined>;

export interface TokenResponse {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  /** Absent for a client that did not register the refresh_token grant (RFC 6749 §5.1: OPTIONAL). */
  refresh_token?: string;
  scope: string;
}

/** Tokens signed and recorded, not yet durable: the use case commits, then announces them (`tokens.issued`) and answers. */
export interface IssuedTokens {
  response: TokenResponse;
  announce(): void;
}

/** One module per grant type; the token endpoint only dispatches (OAuth 2.1 §4). */
export interface GrantType {
  /** Required parameters, each checked before the handler runs (missing → invalid_request); `client_id` among them. */
  parameters: readonly string[];
  /**
   * `client` is the registered client named by `client_id`, already allowed this grant type. Changes the state through
   * the repository and never commits: the token endpoint does, once.
   */
  handler(core: CoreContext, params: TokenParams, client: Client): Promise<IssuedTokens>;
}
