/**
 * Which folder may import which (`npm run lint:deps`). The core is the pure domain; protocol is the wire (paths,
 * formats, event types, the dashboard's overview) that every side shares; the client and the dashboard speak only the wire,
 * so they work against the real service and load neither the server nor the storage layer.
 * @type {import('dependency-cruiser').IConfiguration}
 */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'An import circle makes load order matter and hides which module owns what.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'core-imports-no-adapter',
      severity: 'error',
      comment: 'The core is the pure domain: adapters import it, never the other way round.',
      from: { path: '^src/core/' },
      to: { path: '^src/(server|store|loaders|cli|client|dashboard|mcp|conformance|contract|library)/' },
    },
    {
      name: 'core-state-is-the-lowest-wing',
      severity: 'error',
      comment:
        'The core is in wings, lowest first: state, oauth, resources, emulation (docs/architecture.md, "The core in wings"). State (entity types, ' +
        'repository, events, clock, errors) imports no other wing.',
      from: { path: '^src/core/state/' },
      to: { path: '^src/core/(oauth|resources|emulation)/' },
    },
    {
      name: 'core-oauth-imports-state-only',
      severity: 'error',
      comment:
        'OAuth rules stand on the state alone: an emulation behaviour (a fault, a finding, a consent policy) reaches them through the context as an ' +
        'interface of a lower wing.',
      from: { path: '^src/core/oauth/' },
      to: { path: '^src/core/(resources|emulation)/' },
    },
    {
      name: 'core-resources-import-no-emulation',
      severity: 'error',
      comment:
        'The resource plane imports state and oauth (the access token it checks), never emulation: faults and variation reach it as interfaces of its own ' +
        '(fault-point.ts, variants.ts), which emulation implements.',
      from: { path: '^src/core/resources/' },
      to: { path: '^src/core/emulation/' },
    },
    {
      name: 'core-wings-name-the-root-by-type-only',
      severity: 'error',
      comment:
        'The root (core.ts, context.ts) names every wing. A wing may name the CoreContext it is given, as a type (erased at build), never run code of the ' +
        'root.',
      from: { path: '^src/core/(state|oauth|resources|emulation)/' },
      to: { path: '^src/core/[^/]+$', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'library-imports-no-cli',
      severity: 'error',
      comment: "startEmulator runs in its user's process: the CLI's process-wide settings (signals, the exit code) stay in the CLI.",
      from: { path: '^src/(server|store|loaders|mcp|conformance|contract|library)/|^src/index\\.ts$' },
      to: { path: '^src/cli/' },
    },
    {
      name: 'apps-share-through-app-common',
      severity: 'error',
      comment: 'The API app and the auth app share their options and hooks through server/app-common.ts: neither imports the other.',
      from: { path: '^src/server/(api|auth)-app\\.ts$' },
      to: { path: '^src/server/(api|auth)-app\\.ts$' },
    },
    {
      name: 'client-and-dashboard-speak-only-the-wire',
      severity: 'error',
      comment: 'The client and the dashboard import protocol, their own folder, node built-ins and npm packages only.',
      from: { path: '^src/(client|dashboard)/' },
      to: { path: '^src/', pathNot: ['^src/protocol/', '^src/$1/'] },
    },
    {
      name: 'conformance-grades-through-the-emulator',
      comment:
        'The conformance runner starts emulators and judges what they saw: it imports core, server and protocol, never the client it grades, the CLI or ' +
        'the dashboard.',
      severity: 'error',
      from: { path: '^src/conformance/' },
      to: { path: '^src/(client|cli|dashboard)/' },
    },
    {
      name: 'contract-speaks-only-the-wire',
      severity: 'error',
      comment:
        '`conformance server` checks any server through the wire alone: the client, protocol, the shared report format and the pure profile module; never ' +
        'the emulator it may be pointed at.',
      from: { path: '^src/contract/' },
      to: {
        path: '^src/',
        pathNot: ['^src/(protocol|client|contract)/', '^src/conformance/report\\.ts$', '^src/core/emulation/variant-profile\\.ts$'],
      },
    },
    {
      name: 'protocol-imports-nothing-else-under-src',
      severity: 'error',
      comment: 'Protocol is definitions every side shares: it depends on none of them.',
      from: { path: '^src/protocol/' },
      to: { path: '^src/', pathNot: '^src/protocol/' },
    },
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      comment: 'An import that resolves to nothing fails at run time.',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
    },
  },
};
