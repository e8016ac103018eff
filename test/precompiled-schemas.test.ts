import { execFile } from 'node:child_process';
import { cp, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PrecompiledSchemas } from '../src/server/route-schemas.js';
import { startServe } from './helpers/cli.js';
import { startEmulator } from './helpers/emulator.js';
import { bundleChunks, writeResolveHooks } from './helpers/module-trace.js';

/**
 * Route schemas are compiled by `npm run build` (dist/server/compile-route-schemas.js into dist/generated/): these run
 * the real build, as `serve` and the programmatic start do, and watch what Node loads with a module-resolve hook.
 */

const ROOT = fileURLToPath(new URL('../', import.meta.url));

// Loaded with --import before the program: registers the hooks, and at exit adds what CommonJS loaded on its own.
const REGISTER = `
import { register, createRequire } from 'node:module';
import { appendFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
const out = process.env.LOADED_OUT;
register(new URL('./hooks.mjs', import.meta.url), { data: { out } });
process.on('exit', () => {
  for (const file of Object.keys(createRequire(import.meta.url).cache)) appendFileSync(out, pathToFileURL(file).href + '\\n');
});
`;

// Starts the built emulator with the compilers PrecompiledSchemas.load() gives (the start's default), then prints what
// served each route schema and which schemas the generated file holds. With "own", it adds a route of its own through
// extendApi first, and posts a good and a bad body to it.
const REPORT = `
const [root, own] = process.argv.slice(1);
const { Emulator } = await import(root + 'dist/server/emulator.js');
const { PrecompiledSchemas, defaultGeneratedFile } = await import(root + 'dist/server/route-schemas.js');
const { createRequire } = await import('node:module');
const schemaCompilers = PrecompiledSchemas.load();
const notices = [];
const ownSchema = { body: { type: 'object', required: ['n'], properties: { n: { type: 'integer' } } } };
const emulator = await Emulator.start({
  inMemory: true, port: 0, authPort: 0, schemaCompilers, onNotice: (line) => notices.push(line),
  ...(own ? { extendApi: (app) => void app.post('/own', { schema: ownSchema }, async (request) => request.body) } : {}),
});
const usesAtStart = [...schemaCompilers.uses];
const post = (body) => fetch(emulator.baseUrl + '/own', { method: 'POST', headers: { 'content-type': 'application/json' }, body });
const statuses = own ? [(await post('{"n":1}')).status, (await post('{"n":"1"}')).status] : [];
await emulator.stop();
const generated = createRequire(import.meta.url)(defaultGeneratedFile());
process.stdout.write(JSON.stringify({
  uses: usesAtStart,
  notices,
  statuses,
  validators: Object.keys(generated.validators),
  serializers: Object.keys(generated.serializers),
}));
`;

interface Report {
  uses: Array<{ kind: string; key: string; precompiled: boolean; reason?: string }>;
  notices: string[];
  statuses: number[];
  validators: string[];
  serializers: string[];
}

async function report(...args: string[]): Promise<Report> {
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', REPORT, pathToFileURL(ROOT).href, ...args]);
  return JSON.parse(stdout) as Report;
}

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'aa-schemas-'));
  await writeResolveHooks(dir);
  await writeFile(join(dir, 'register.mjs'), REGISTER);
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A copy of the built package (bin/, dist/, package.json; node_modules linked) whose build a test may change. */
async function copyOfBuild(name: string): Promise<string> {
  const root = join(dir, name);
  for (const part of ['bin', 'dist', 'fixtures', 'package.json']) await cp(join(ROOT, part), join(root, part), { recursive: true });
  await symlink(join(ROOT, 'node_modules'), join(root, 'node_modules'), 'dir');
  return root;
}

const registration = (clientName: string) => ({
  client_name: clientName,
  redirect_uris: ['http://127.0.0.1:9/cb'],
  grant_types: ['authorization_code'],
  response_types: ['code'],
  token_endpoint_auth_method: 'none',
});

async function register(baseUrl: string, body: unknown) {
  const res = await request(`${baseUrl}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown> };
}

async function token(baseUrl: string, form: string) {
  const res = await request(`${baseUrl}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: form,
  });
  return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown> };
}

const schemaNotices = (stderr: string) => stderr.split('\n').filter((line) => line.includes('route schemas'));
const npm = (path: string) => (url: string) => url.includes(`/node_modules/${path}`);

describe('route schemas compiled ahead of time', () => {
  it('serve validates and serialises without loading the ajv or fast-json-stringify compilers', async () => {
    const out = join(dir, 'loaded.txt');
    await writeFile(out, '');
    // The compilers are left out of the command line's bundle (rolldown.config.js): loaded, they would be files here.
    const serve = await startServe(['--in-memory'], {
      nodeArgs: ['--import', pathToFileURL(join(dir, 'register.mjs')).href],
      env: { LOADED_OUT: out },
    });
    const base = serve.ready.base_url;
    // The validator and the 201 serializer of registration, the validator of the token endpoint.
    const registered = await register(base, registration('Precompiled'));
    expect(registered.status).toBe(201);
    expect(Object.keys(registered.body).sort()).toEqual([
      'client_id',
      'client_id_issued_at',
      'client_name',
      'grant_types',
      'redirect_uris',
      'response_types',
      'token_endpoint_auth_method',
    ]);
    expect(await token(base, 'grant_type=a&grant_type=b')).toEqual({
      status: 400,
      body: { error: 'invalid_request', error_description: 'grant_type must be a string, given once' },
    });
    // A serializer that picks an anyOf branch (the baseline, or null) with its inlined validator.
    const snapshots = await request(`${serve.ready.admin_url}/snapshots`, {
      headers: { authorization: `Bearer ${serve.ready.admin_token}` },
    });
    expect(snapshots.statusCode).toBe(200);
    expect(((await snapshots.body.json()) as { baseline: unknown }).baseline).toMatchObject({ name: expect.any(String) });
    expect(await serve.stop()).toBe(0);
    const loaded = [...new Set((await readFile(out, 'utf8')).split('\n').filter(Boolean))];

    // What the generated code uses: ajv's run-time helpers and fast-json-stringify's serializer.
    expect(loaded.filter(npm('ajv/dist/runtime/')).length).toBeGreaterThan(0);
    expect(loaded.filter(npm('fast-json-stringify/lib/serializer.js'))).toHaveLength(1);
    // What compiles: none of it.
    for (const compiler of [
      'ajv/dist/ajv.js',
      'ajv/dist/core.js',
      'ajv/dist/compile/',
      'ajv/dist/standalone/',
      '@fastify/ajv-compiler/',
      '@fastify/fast-json-stringify-compiler/',
      'fast-json-stringify/index.js',
    ])
      expect(loaded.filter(npm(compiler)), compiler).toEqual([]);
    expect(schemaNotices(serve.stderr())).toEqual([]);
  });

  it('every route schema of both servers is served by the function the build generated for it', async () => {
    const { uses, notices, validators, serializers } = await report();
    expect(uses.filter((use) => !use.precompiled)).toEqual([]);
    const served = (kind: string) => [...new Set(uses.filter((use) => use.kind === kind).map((use) => use.key))].sort();
    // Each generated function served a route, and no route schema was left to a compiler.
    expect(served('validator')).toEqual([...validators].sort());
    expect(served('serializer')).toEqual([...serializers].sort());
    expect(validators).toEqual(
      expect.arrayContaining(['api POST /oauth/token body', 'api POST /_admin/faults body', 'auth GET /oauth/authorize querystring']),
    );
    expect(serializers).toEqual(expect.arrayContaining(['api POST /oauth/register 201', 'api GET /_admin/snapshots 200']));
    expect(notices).toEqual([]);
  });

  it('a schema changed after the build is compiled at start, said so, and its new rule applies', async () => {
    const root = await copyOfBuild('changed');
    // The command line runs from its bundle: the schema is changed in the chunk that holds it.
    const chunks = await bundleChunks(root);
    const [chunk] = Object.keys(chunks).filter((file) => chunks[file]!.includes('dist/server/schemas.js'));
    const schemas = join(root, 'dist/bundle', chunk!);
    const source = await readFile(schemas, 'utf8');
    expect(source).toContain('client_name: str(200)');
    await writeFile(schemas, source.replace('client_name: str(200)', 'client_name: str(5)'));

    const serve = await startServe(['--in-memory'], { bin: join(root, 'bin/agent-access.js') });
    expect(schemaNotices(serve.stderr())).toEqual([
      'agent-access: compiled 1 route schemas at start, changed since the build: api POST /oauth/register body (validator); run npm run build',
    ]);
    expect((await register(serve.ready.base_url, registration('Short'))).status).toBe(201);
    expect(await register(serve.ready.base_url, registration('Longer'))).toMatchObject({
      status: 400,
      body: { error: 'invalid_client_metadata' },
    });
    expect(await serve.stop()).toBe(0);
  });

  it('without the generated file every schema is compiled at start, and the start says why', async () => {
    const root = await copyOfBuild('missing');
    await rm(join(root, 'dist/generated/route-schemas.cjs'));
    const serve = await startServe(['--in-memory'], { bin: join(root, 'bin/agent-access.js') });
    const [notice, ...more] = schemaNotices(serve.stderr());
    expect(more).toEqual([]);
    expect(notice).toMatch(/^agent-access: compiled all \d+ route schemas at start: .*route-schemas\.cjs is missing; run npm run build$/);
    expect(await token(serve.ready.base_url, 'grant_type=a&grant_type=b')).toEqual({
      status: 400,
      body: { error: 'invalid_request', error_description: 'grant_type must be a string, given once' },
    });
    expect(await serve.stop()).toBe(0);
  });

  it('a route added through extendApi is compiled when it registers, before any request, without a notice', async () => {
    const { uses, notices, statuses } = await report('own');
    expect(uses.filter((use) => use.key === 'api POST /own body')).toEqual([
      { kind: 'validator', key: 'api POST /own body', precompiled: false, reason: 'not generated' },
    ]);
    expect(uses.filter((use) => !use.precompiled)).toHaveLength(1);
    expect(notices).toEqual([]);
    expect(statuses).toEqual([200, 400]);
  });

  it('running from source, as the in-process tests do, the code the build generated serves every route schema', async () => {
    const schemaCompilers = PrecompiledSchemas.load();
    await startEmulator({ schemaCompilers });
    expect(schemaCompilers.uses.length).toBeGreaterThan(50);
    // Fails after a schema change until `npm run build`: the in-process tests would check compiled validators only.
    expect(schemaCompilers.uses.filter((use) => !use.precompiled)).toEqual([]);
  });
});
