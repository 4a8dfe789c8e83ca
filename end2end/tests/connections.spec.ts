import { expect, test } from '@playwright/test';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ACME_ADMIN, GLOBEX_VIEWER, hydrated, login } from './helpers';

/** A downstream API on a free local port: what it was sent, and an echo of its Authorization. */
async function downstream(): Promise<{ url: string; seen: http.IncomingHttpHeaders[]; close: () => void }> {
  const seen: http.IncomingHttpHeaders[] = [];
  const server = http.createServer((req, res) => {
    seen.push(req.headers);
    req.resume();
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ id: 'ch_e2e', echo_auth: req.headers.authorization ?? null }));
    });
  });
  await new Promise<void>((ready) => server.listen(0, '127.0.0.1', ready));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/v1/`, seen, close: () => server.close() };
}

test('an acme admin keeps a connection whose secret is never displayed, and a run calls through it', async ({ page }) => {
  const api = await downstream();
  const secret = `sk_e2e_${Date.now()}_${Math.random().toString(36).slice(2)}`;
  const name = `e2e-${Date.now()}`;
  await login(page, ACME_ADMIN);
  await page.getByTestId('nav-connections').click();
  await expect(page).toHaveURL(/\/connections$/);
  await hydrated(page);

  await page.getByTestId('connection-name').fill(name);
  await page.getByTestId('connection-kind').selectOption('http');
  await page.getByTestId('connection-base-url').fill(api.url);
  await page.getByTestId('connection-headers').fill('Accept: application/json');
  await page.getByTestId('connection-secret-name').fill('Authorization');
  await expect(page.getByTestId('connection-secret-value')).toHaveAttribute('type', 'password');
  await page.getByTestId('connection-secret-value').fill(`Bearer ${secret}`);
  await page.getByTestId('connection-save').click();
  await expect(page.getByTestId('connection-saved')).toContainText(`connection ${name} created`);
  const row = page.getByTestId('connection-row').filter({ hasText: name });
  await expect(row.getByTestId('connection-row-url')).toHaveText(api.url);
  await expect(row.getByTestId('connection-secret')).toContainText('Authorization');
  await expect(row.getByTestId('connection-secret')).toContainText('set ');
  expect(await page.content()).not.toContain(secret);

  // A secret value without its name is refused, saying what to do; nothing changes.
  await page.getByTestId('connection-name').fill(name);
  await page.getByTestId('connection-secret-name').fill('');
  await page.getByTestId('connection-secret-value').fill('orphan-value');
  await page.getByTestId('connection-save').click();
  await expect(page.getByTestId('connection-error')).toContainText('name the secret');

  // Edit fills the form from the row; saving without a secret value keeps the stored one.
  await row.getByTestId('connection-edit').click();
  await expect(page.getByTestId('connection-base-url')).toHaveValue(api.url);
  await page.getByTestId('connection-secret-value').fill('');
  await page.getByTestId('connection-save').click();
  await expect(page.getByTestId('connection-saved')).toContainText(`connection ${name} saved`);
  await expect(row.getByTestId('connection-secret')).toContainText('Authorization');

  // A run calls the downstream through the connection: it got the secret, the run shows none.
  await page.goto('/');
  await hydrated(page);
  await page.getByLabel('Workflow', { exact: true }).selectOption('demo.http');
  await page
    .getByLabel('Input (JSON)')
    .fill(JSON.stringify({ connection: name, method: 'POST', path: 'charges', body: { amount: 5 } }));
  await page.getByRole('button', { name: 'Start run' }).click();
  await expect(page).toHaveURL(/\/runs\/run_/);
  await hydrated(page);
  await expect(page.getByTestId('run-status')).toHaveText('completed', { timeout: 20_000 });
  await expect(page.locator('body')).toContainText('[redacted]');
  expect(await page.content()).not.toContain(secret);
  expect(api.seen.map((h) => h.authorization)).toContain(`Bearer ${secret}`);
  api.close();

  await page.goto('/connections');
  await hydrated(page);
  await page.getByTestId('connection-row').filter({ hasText: name }).getByTestId('connection-delete').click();
  await expect(page.getByTestId('connection-row').filter({ hasText: name })).toHaveCount(0);
});

test('a globex viewer sees its own connections only, and changes none', async ({ page }) => {
  await login(page, GLOBEX_VIEWER);
  await page.getByTestId('nav-connections').click();
  await hydrated(page);
  await expect(page.getByTestId('connection-save')).toHaveCount(0);
  await expect(page.getByTestId('connections-empty')).toBeVisible();
  const response = await page.request.post('/api/save_connection', {
    form: { name: 'sneaky', kind: 'secret', base_url: '', headers: '', secret_name: 'k', secret_value: 'v' },
  });
  expect(response.status()).toBe(403);
});
