/** Environment variables the client side reads: the client, the dashboard and the admin commands (documented in docs/client.md). */
export const ENV = {
  baseUrl: 'AGENT_ACCESS_BASE_URL',
  configDir: 'AGENT_ACCESS_CONFIG_DIR',
  browser: 'BROWSER',
  noColor: 'NO_COLOR',
  /** The admin token for `dashboard --url` and `clock --url` (`serve --json` prints it). */
  adminToken: 'AGENT_ACCESS_ADMIN_TOKEN',
} as const;
