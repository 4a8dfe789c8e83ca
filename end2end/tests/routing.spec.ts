import { expect, test } from '@playwright/test';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ACME_ADMIN, GLOBEX_VIEWER, hydrated, login } from './helpers';

test('an acme admin makes a pool, a rule and a connection; a run goes through the pool with the secret never shown', async ({ page }) => {
  // The downstream API the run calls, on a free local port.
  const auth: (string | undefined)[] = [];
  const api = http.createServer((req, res) => {
    auth.push(req.headers.authorization);
    req.resume();
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ ok: true }));
    });
  });
  await new Promise<void>((ready) => api.listen(0, '127.0.0.1', ready));
  const { port } = api.address() as AddressInfo;
  const stamp = Date.now();
  const pool = `egress-${stamp}`;
  const connection = `api-${stamp}`;
  const secret = `sk_route_${stamp}_${Math.random().toString(36).slice(2)}`;
  await login(page, ACME_ADMIN);

  // A pool.
  await page.getByTestId('nav-pools').click();
  await hydrated(page);
  await page.getByTestId('pool-name').fill(pool);
  await page.getByTestId('pool-save').click();
  await expect(page.getByTestId('pool-saved')).toContainText(`partition acme.${pool}`);

  // A rule sending demo.http's call to it, and what the tester says of it.
  await page.getByTestId('nav-routing').click();
  await expect(page).toHaveURL(/\/routing$/);
  await hydrated(page);
  await page.getByTestId('rule-workflow').fill('demo.http');
  await page.getByTestId('rule-step').fill('durable.http');
  await page.getByTestId('rule-pool-choice').selectOption(pool);
  await page.getByTestId('rule-add').click();
  await expect(page.getByTestId('rule-saved')).toContainText('rule added');
  const rule = page.getByTestId('rule-row').filter({ hasText: pool });
  await expect(rule.getByTestId('rule-match')).toHaveText('workflow demo.http, step durable.http');
  await expect(page.getByTestId('rule-row').last().getByTestId('rule-match')).toHaveText('everything else');
  await page.getByTestId('test-workflow').fill('demo.http');
  await page.getByTestId('test-step').fill('durable.http');
  await page.getByTestId('test-route').click();
  await expect(page.getByTestId('route-answer')).toContainText(`→ acme.${pool}: routed to ${pool} by rule`);
  await page.getByTestId('test-step').fill('order.charge');
  await page.getByTestId('test-route').click();
  await expect(page.getByTestId('route-answer')).toContainText("→ acme: routed to the tenant's partition");

  // A connection with a secret header.
  await page.getByTestId('nav-connections').click();
  await hydrated(page);
  await page.getByTestId('connection-name').fill(connection);
  await page.getByTestId('connection-base-url').fill(`http://127.0.0.1:${port}/v1/`);
  await page.getByTestId('connection-secret-name').fill('Authorization');
  await page.getByTestId('connection-secret-value').fill(`Bearer ${secret}`);
  await page.getByTestId('connection-save').click();
  await expect(page.getByTestId('connection-saved')).toContainText(`connection ${connection} created`);
  expect(await page.content()).not.toContain(secret);

  // The run: its call went to the pool by the rule, the downstream got the secret, the page
  // shows neither the secret nor anything that holds it.
  await page.goto('/');
  await hydrated(page);
  await page.getByLabel('Workflow', { exact: true }).selectOption('demo.http');
  await page.getByLabel('Input (JSON)').fill(JSON.stringify({ connection, method: 'GET', path: 'ping' }));
  await page.getByRole('button', { name: 'Start run' }).click();
  await expect(page).toHaveURL(/\/runs\/run_/);
  await hydrated(page);
  await expect(page.getByTestId('run-status')).toHaveText('completed', { timeout: 20_000 });
  await expect(page.getByTestId('checkpoint-route').first()).toContainText(`routed to ${pool} by rule`);
  expect(await page.content()).not.toContain(secret);
  expect(auth).toContain(`Bearer ${secret}`);
  api.close();

  // Clean up: the rule first (a pool a rule names cannot be deleted), then the pool.
  await page.goto('/routing');
  await hydrated(page);
  await page.getByTestId('rule-row').filter({ hasText: pool }).getByTestId('rule-remove').click();
  await expect(page.getByTestId('rule-row').filter({ hasText: pool })).toHaveCount(0);
  await page.goto('/pools');
  await hydrated(page);
  await page.getByTestId('pool-row').filter({ hasText: pool }).getByTestId('pool-delete').click();
  await expect(page.getByTestId('pool-row').filter({ hasText: pool })).toHaveCount(0);
});

test('a globex viewer reads its rules and asks where a step would go, but changes nothing', async ({ page }) => {
  await login(page, GLOBEX_VIEWER);
  await page.getByTestId('nav-routing').click();
  await hydrated(page);
  await expect(page.getByTestId('rule-add')).toHaveCount(0);
  await page.getByTestId('test-workflow').fill('demo.order');
  await page.getByTestId('test-step').fill('order.charge');
  await page.getByTestId('test-route').click();
  await expect(page.getByTestId('route-answer')).toContainText('→ globex');
  const response = await page.request.post('/api/add_rule', {
    form: { version: '0', 'fields[workflow]': 'x', 'fields[pool]': 'default' },
  });
  expect(response.status()).toBe(403);
});
