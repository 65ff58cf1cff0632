// Two projects: `unit` (pure logic, no cluster) and `e2e` (against the real
// local control plane that test/e2e/global-setup.ts starts once per run).
// TypeScript is transpiled by ts-jest as native ESM (node --experimental-vm-modules),
// because @kubernetes/client-node and p-queue ship ESM only. Type errors are
// caught by `npm run typecheck`, so transpilation here is per-file and fast.

/** @type {import('jest').Config['projects'][number]} */
const common = {
  extensionsToTreatAsEsm: ['.ts'],
  transform: {
    '^.+\\.ts$': [
      'ts-jest',
      {
        useESM: true,
        diagnostics: false,
        // Keep `./x.ts` specifiers as written: jest resolves them, and so does
        // Node itself (type stripping) for the global setup's imports.
        tsconfig: { rewriteRelativeImportExtensions: false, allowImportingTsExtensions: true },
      },
    ],
  },
  testEnvironment: 'node',
};

/** @type {import('jest').Config} */
export default {
  reporters: ['default', '<rootDir>/test/summary-reporter.js'],
  // e2e tests wait on a real control plane; unit tests finish far below this.
  testTimeout: 180_000,
  projects: [
    {
      ...common,
      displayName: 'unit',
      testMatch: [
        '<rootDir>/src/**/*.test.ts',
        '<rootDir>/test/unit/**/*.test.ts',
        '<rootDir>/soak/**/*.test.ts',
        '<rootDir>/bench/**/*.test.ts',
      ],
    },
    {
      ...common,
      displayName: 'e2e',
      testMatch: ['<rootDir>/test/e2e/**/*.test.ts'],
      globalSetup: '<rootDir>/test/e2e/global-setup.ts',
      globalTeardown: '<rootDir>/test/e2e/global-teardown.ts',
    },
  ],
};
