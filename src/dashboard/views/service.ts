import type { DashboardState } from '../model.js';
import { line, type Line } from './common.js';

/**
 * Where this emulator serves what, as the ready lines of `serve` say it: a dashboard (`serve --ui` prints no ready
 * lines) is where a person looks for the consent and settings pages.
 */
export function serviceLines(state: DashboardState): Line[] {
  const s = state.service;
  if (!s) return [line('waiting for the emulator…', 'dim')];
  return [
    line(`base_url ${s.base_url}   (issuer, API, ${s.base_url}/mcp)`),
    line(`auth_url ${s.auth_url}   (browser pages)`),
    ...pageLines(state),
    line(`metadata ${s.base_url}/.well-known/oauth-authorization-server`),
  ];
}

/** The consent and settings pages: in the help, the Grants view with nothing selected, and each grant's detail. */
export function pageLines(state: DashboardState): Line[] {
  const s = state.service;
  if (!s) return [];
  return [
    line(`consent  ${s.auth_url}/oauth/authorize   (a client's login opens it)`),
    line(`settings ${s.auth_url}/settings   (the person's grants, to revoke)`),
  ];
}
