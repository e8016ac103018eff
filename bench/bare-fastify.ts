// The ceiling: plain fastify with the same metadata path and a trivial token-like POST.
import Fastify from 'fastify';

const port = Number(process.argv[2]);
if (!Number.isInteger(port) || port <= 0 || port > 65535) {
  console.error('usage: bare-fastify.js PORT');
  process.exit(2);
}
const origin = `http://127.0.0.1:${port}`;

const app = Fastify({ logger: false });

// Parse form bodies like a token endpoint would, so the POST ceiling includes body parsing.
app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => {
  done(null, Object.fromEntries(new URLSearchParams(body as string)));
});

app.get('/.well-known/oauth-authorization-server', async () => ({
  issuer: origin,
  authorization_endpoint: `${origin}/oauth/authorize`,
  token_endpoint: `${origin}/oauth/token`,
}));

app.post('/oauth/token', async (_req, reply) => {
  reply.header('cache-control', 'no-store');
  return { access_token: 'x', token_type: 'Bearer', expires_in: 900 };
});

app.listen({ port, host: '127.0.0.1' }).then(
  () => console.log(JSON.stringify({ base_url: origin })),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
