import type { FastifyInstance } from 'fastify';

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The error code of a JSON body whose bytes are not UTF-8 (the /mcp route answers it in JSON-RPC's shape). */
export const INVALID_UTF8 = 'AA_ERR_INVALID_UTF8';

/**
 * RFC 8259 §8.1: JSON text is UTF-8. Decoding with replacement, as a plain `toString()` does, would turn broken bytes
 * into U+FFFD and accept a body the client never meant to send; this decodes strictly, or returns null.
 */
export function decodeUtf8(body: Buffer): string | null {
  try {
    return utf8.decode(body);
  } catch {
    return null;
  }
}

/** The app's JSON parser with a strict UTF-8 decoding in front of fastify's own (which refuses prototype poisoning). */
export function useStrictJson(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const text = decodeUtf8(body as Buffer);
    if (text === null)
      return done(
        Object.assign(new Error('the request body is not valid UTF-8 (RFC 8259 §8.1)'), { statusCode: 400, code: INVALID_UTF8 }),
        undefined,
      );
    // fastify's parser answers through `done`; its return value is nothing to wait for.
    void parse(request, text, done);
  });
}
