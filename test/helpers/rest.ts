/**
 * The resource routes as the tests call them (spec 4.4): an ask, a GET and a POST with a bearer token, a raw JSON-RPC
 * message to /mcp, and an emulator with a client logged in. The same for an emulator in this process and one on a
 * socket: each takes how to start it.
 */
import { ManualClock } from '../../src/core/state/clock.js';
import type { Emulator, EmulatorOptions } from '../../src/server/emulator.js';
import { authorizeAndApprove, bearer, http, postJson } from './oauth.js';

/** POST /chat/ask, without a token when none is given. */
export const ask = (emu: Emulator, token: string | undefined, question: unknown, headers: Record<string, string> = {}) =>
  postJson(`${emu.baseUrl}/chat/ask`, { question }, token ? bearer(token, headers) : headers);

export const get = (emu: Emulator, token: string, path: string) => http(`${emu.baseUrl}${path}`, { headers: bearer(token) });

export const post = (emu: Emulator, token: string, path: string, body: unknown, headers: Record<string, string> = {}) =>
  postJson(`${emu.baseUrl}${path}`, body, bearer(token, headers));

/** One JSON-RPC message POSTed to /mcp with a bearer token, as raw HTTP (the 2025 revisions: no session needed). */
export const postMcp = (baseUrl: string, token: string, message: unknown, headers: Record<string, string> = {}) =>
  http(`${baseUrl}/mcp`, {
    method: 'POST',
    headers: bearer(token, { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers }),
    body: JSON.stringify(message),
  });

/** A `tools/call` message. */
export const toolCall = (name: string, args: Record<string, unknown>, id = 1) => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: { name, arguments: args },
});

type Start = (options: EmulatorOptions) => Promise<Emulator>;

/** An emulator started with `options`, a client logged in to it for `scope`: its access token and client id. */
export async function loggedIn(start: Start, options: EmulatorOptions, scope: string) {
  const emu = await start(options);
  const flow = await authorizeAndApprove(emu, { scope });
  return { emu, token: flow.tokens!.access_token, client_id: flow.client_id };
}

/** The same on a manual clock (the one in `options`, else a new one), which it gives back too. */
export async function loggedInOnClock(start: Start, options: EmulatorOptions, scope: string) {
  const clock = (options.clock as ManualClock | undefined) ?? new ManualClock();
  return { clock, ...(await loggedIn(start, { clock, ...options }, scope)) };
}
