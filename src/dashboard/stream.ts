import { setTimeout as sleep } from 'node:timers/promises';
import { createParser } from 'eventsource-parser';
import { request } from 'undici';
import { ADMIN_ROUTES } from '../protocol/admin-api.js';
import type { AdminEndpoint } from '../protocol/admin-client.js';
import type { AppEvent } from '../protocol/events.js';
import type { ResolveAdmin } from '../protocol/locate.js';
import type { Overview } from '../protocol/overview.js';
import type { StreamMessage } from './model.js';

export interface FollowOptions {
  resolve: ResolveAdmin;
  onMessage: (message: StreamMessage) => void;
  signal: AbortSignal;
  /** Local time, for when the connection changed. */
  now?: () => number;
  /** Back-off between attempts, doubling from `min` to `max` ms. */
  retry?: { min: number; max: number };
  /** No byte for this long (ticks come every second) means the connection is dead. */
  silenceMs?: number;
}

/**
 * Follows the admin event stream until `signal` aborts: an overview, then events and ticks, reconnecting with
 * back-off whenever the server goes away, and reporting each change of connection as a message.
 */
export async function followAdminStream(options: FollowOptions): Promise<void> {
  const { resolve, onMessage, signal } = options;
  const now = options.now ?? Date.now;
  const retry = options.retry ?? { min: 250, max: 2000 };
  let wait = retry.min;
  while (!signal.aborted) {
    const endpoint = await resolve().catch((e: Error) => ({ unavailable: e.message }));
    if ('unavailable' in endpoint) {
      onMessage({ type: 'connection', status: 'disconnected', detail: endpoint.unavailable, at: now() });
    } else {
      const connected = await followOnce(endpoint, options, now);
      if (connected) wait = retry.min;
    }
    if (signal.aborted) break;
    await sleep(wait, undefined, { signal }).catch(() => undefined);
    wait = Math.min(wait * 2, retry.max);
  }
}

/** One connection; resolves when it ends. Returns whether an overview arrived (the connection worked). */
async function followOnce(endpoint: AdminEndpoint, options: FollowOptions, now: () => number): Promise<boolean> {
  const { onMessage, signal } = options;
  const url = `${endpoint.adminUrl}${ADMIN_ROUTES.events}`;
  let connected = false;
  try {
    const response = await request(url, {
      headers: { authorization: `Bearer ${endpoint.token}`, accept: 'text/event-stream' },
      signal,
      headersTimeout: options.silenceMs ?? 5000,
      bodyTimeout: options.silenceMs ?? 5000,
    });
    if (response.statusCode !== 200) {
      const body = (await response.body.json().catch(() => ({}))) as { detail?: string };
      const hint = response.statusCode === 401 ? ' (the admin token does not match this emulator)' : '';
      onMessage({
        type: 'connection',
        status: 'disconnected',
        detail: `${url} answered ${response.statusCode}: ${body.detail ?? ''}${hint}`,
        url,
        at: now(),
      });
      return false;
    }
    const parser = createParser({
      onEvent: ({ event, data }) => {
        if (event === 'overview') {
          onMessage({ type: 'overview', overview: JSON.parse(data) as Overview });
          connected = true;
          onMessage({ type: 'connection', status: 'connected', url, at: now() });
        } else if (event === 'tick') {
          onMessage({ type: 'tick', now: (JSON.parse(data) as { now: number }).now });
        } else if (event === 'error') {
          onMessage({
            type: 'connection',
            status: 'disconnected',
            detail: (JSON.parse(data) as { message: string }).message,
            url,
            at: now(),
          });
        } else if (event) {
          onMessage({ type: 'event', event: JSON.parse(data) as AppEvent });
        }
      },
    });
    const decoder = new TextDecoder();
    for await (const chunk of response.body) parser.feed(decoder.decode(chunk as Uint8Array, { stream: true }));
    if (!signal.aborted)
      onMessage({ type: 'connection', status: 'disconnected', detail: 'the emulator closed the stream', url, at: now() });
  } catch (e) {
    if (!signal.aborted) onMessage({ type: 'connection', status: 'disconnected', detail: describe(e as Error), url, at: now() });
  }
  return connected;
}

function describe(error: Error & { code?: string }): string {
  if (error.code === 'ECONNREFUSED') return 'the emulator is not running (connection refused)';
  if (error.code === 'UND_ERR_BODY_TIMEOUT' || error.code === 'UND_ERR_HEADERS_TIMEOUT') return 'the emulator stopped answering';
  if (error.code === 'UND_ERR_SOCKET' || error.code === 'ECONNRESET') return 'the connection to the emulator was lost';
  return error.message;
}
