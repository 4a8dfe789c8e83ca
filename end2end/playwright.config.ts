import { defineConfig } from '@playwright/test';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

// The server under test: the debug binary built by `make build`, on its own port and a fresh
// SQLite file, with known demo passwords.
const port = process.env.DURABLE_E2E_PORT ?? '3017';
const baseURL = `http://127.0.0.1:${port}`;
const bin = process.env.DURABLE_BIN ?? path.join(os.homedir(), '.cache/durable/target/debug/durable');
const siteRoot = process.env.LEPTOS_SITE_ROOT ?? path.resolve(__dirname, '../target/site');
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-e2e-'));

export default defineConfig({
  testDir: './tests',
  outputDir: './output/test-results',
  timeout: 45_000,
  expect: { timeout: 15_000 },
  fullyParallel: false,
  workers: 1,
  reporter: [['list']],
  use: {
    baseURL,
    browserName: 'chromium',
    launchOptions: {
      executablePath: '/usr/bin/chromium',
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    },
    screenshot: 'only-on-failure',
    trace: 'retain-on-failure',
  },
  webServer: {
    command: `${bin} serve --demo`,
    url: `${baseURL}/healthz`,
    timeout: 60_000,
    reuseExistingServer: false,
    stdout: 'pipe',
    stderr: 'pipe',
    env: {
      DATABASE_URL: `sqlite://${dataDir}/e2e.db`,
      DURABLE_BIND: `127.0.0.1:${port}`,
      DURABLE_DEMO_PASSWORD: 'e2e-demo-password',
      // Seals the connections the tests create; the tests' downstream server listens here.
      DURABLE_MASTER_KEY: 'e2e0'.repeat(16),
      DURABLE_CONNECTION_ALLOW: '127.0.0.1',
      LEPTOS_SITE_ROOT: siteRoot,
      RUST_LOG: 'info',
    },
  },
});
