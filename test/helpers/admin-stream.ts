/** The emulator's admin stream (GET {admin}/events, server-sent events) read with a plain SSE parser, as any client would. */
import { createParser } from 'eventsource-parser';
import { request } from 'undici';
import type { StreamMessage } from '../../src/dashboard/model.js';

export interface AdminStreamMessage {
  event: string;
  id: string | undefined;
  data: any;
}

/**
 * Opens the stream; `until(test)` resolves as soon as the messages so far satisfy `test` (checked on each new
 * message), or fails after `timeoutMs` naming what was seen.
 */
export async function openAdminStream(
  emu: { adminUrl: string; adminToken: string },
  headers: Record<string, string> = {},
  timeoutMs = 5_000,
) {
  const controller = new AbortController();
  const res = await request(`${emu.adminUrl}/events`, {
    headers: { authorization: `Bearer ${emu.adminToken}`, ...headers },
    signal: controller.signal,
  });
  const messages: AdminStreamMessage[] = [];
  const waiters = new Set<() => void>();
  const parser = createParser({
    onEvent: (e) => {
      messages.push({ event: e.event ?? 'message', id: e.id, data: JSON.parse(e.data) });
      for (const wake of waiters) wake();
    },
  });
  const done = (async () => {
    const decoder = new TextDecoder();
    try {
      for await (const chunk of res.body) parser.feed(decoder.decode(chunk as Uint8Array, { stream: true }));
    } catch {
      // aborted by close()
    }
  })();
  const until = (test: (all: AdminStreamMessage[]) => boolean, what: string): Promise<void> =>
    new Promise((resolve, reject) => {
      const check = () => {
        if (!test(messages)) return;
        clearTimeout(timer);
        waiters.delete(check);
        resolve();
      };
      const timer = setTimeout(() => {
        waiters.delete(check);
        reject(new Error(`no ${what} in ${JSON.stringify(messages.map((m) => m.event))}`));
      }, timeoutMs);
      waiters.add(check);
      check();
    });
  return { res, messages, until, done, close: () => controller.abort() };
}

/** The stream's messages as the dashboard's stream client hands them to its reducer (ticks left out). */
export const dashboardMessages = (messages: readonly AdminStreamMessage[]): StreamMessage[] =>
  messages.flatMap((m): StreamMessage[] =>
    m.event === 'overview'
      ? [{ type: 'overview', overview: m.data }]
      : m.event !== 'tick' && m.event !== 'message'
        ? [{ type: 'event', event: m.data }]
        : [],
  );
