// Baseline for the "ask" scenario: bare fastify with one route, POST /chat/ask, that only verifies an
// ES256 JWT access token (RFC 9068, typ at+jwt) with jose and answers a small JSON. No search, no storage.
// It generates its key pair at start, signs one token with the same claim set as ours, and prints
// {"base_url", "token"} as a JSON line on stdout once listening.
import { randomUUID } from 'node:crypto';
import Fastify from 'fastify';
import { generateKeyPair, jwtVerify, SignJWT } from 'jose';

const port = Number(process.argv[2]);
if (!Number.isInteger(port) || port <= 0 || port > 65535) {
  console.error('usage: bare-verify.js PORT');
  process.exit(2);
}
const origin = `http://127.0.0.1:${port}`;
const audience = `${origin}/mcp`;

const { publicKey, privateKey } = await generateKeyPair('ES256');

const now = Math.floor(Date.now() / 1000);
const token = await new SignJWT({ client_id: 'bench', scope: 'ask', grant_id: randomUUID(), family_id: randomUUID() })
  .setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: 'bench' })
  .setIssuer(origin)
  .setSubject('bench-person')
  .setAudience(audience)
  .setIssuedAt(now)
  .setExpirationTime(now + 900)
  .setJti(randomUUID())
  .sign(privateKey);

const app = Fastify({ logger: false });

app.get('/.well-known/oauth-authorization-server', async () => ({
  issuer: origin,
  authorization_endpoint: `${origin}/oauth/authorize`,
  token_endpoint: `${origin}/oauth/token`,
}));

const challenge = 'Bearer error="invalid_token", scope="ask"';

app.post('/chat/ask', async (req, reply) => {
  const auth = req.headers.authorization;
  if (typeof auth !== 'string' || !auth.startsWith('Bearer ')) {
    reply.code(401).header('www-authenticate', 'Bearer scope="ask"');
    return { error: 'invalid_token' };
  }
  let scope: unknown;
  try {
    const { payload } = await jwtVerify(auth.slice(7), publicKey, {
      algorithms: ['ES256'],
      typ: 'at+jwt',
      issuer: origin,
      audience,
      requiredClaims: ['sub', 'exp', 'iat', 'jti', 'client_id', 'scope'],
    });
    scope = payload['scope'];
  } catch {
    reply.code(401).header('www-authenticate', challenge);
    return { error: 'invalid_token' };
  }
  if (typeof scope !== 'string' || !scope.split(' ').includes('ask')) {
    reply.code(403).header('www-authenticate', 'Bearer error="insufficient_scope", scope="ask"');
    return { error: 'insufficient_scope' };
  }
  const question = (req.body as { question?: unknown } | undefined)?.question;
  if (typeof question !== 'string') {
    reply.code(400);
    return { error: 'invalid_request' };
  }
  reply.header('cache-control', 'no-store');
  return { answer: 'Der Hufschmied kommt am Dienstag.', sources: [], message_id: randomUUID() };
});

app.listen({ port, host: '127.0.0.1' }).then(
  () => console.log(JSON.stringify({ base_url: origin, token })),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
