import { expect, test } from '@playwright/test';
import { ACME_ADMIN, GLOBEX_VIEWER, hydrated, login } from './helpers';

test('an acme admin issues an API token, it works on the API, and once revoked it is refused', async ({ page }) => {
  await login(page, ACME_ADMIN);
  await page.getByTestId('nav-tokens').click();
  await expect(page).toHaveURL(/\/tokens$/);
  await hydrated(page);

  await page.getByTestId('token-name').fill('e2e-reporting');
  await page.getByTestId('token-scope').selectOption('read');
  await page.getByTestId('token-issue').click();
  const issued = page.getByTestId('token-issued');
  await expect(issued).toContainText('dtk_');
  const token = (await issued.textContent())!.trim();
  const row = page.getByTestId('token-row').filter({ hasText: 'e2e-reporting' });
  await expect(row.getByTestId('token-state')).toHaveText('live');

  // The token reads acme's runs, and being read-only, starts nothing.
  const auth = { Authorization: `Bearer ${token}` };
  expect((await page.request.get('/api/v1/runs', { headers: auth })).status()).toBe(200);
  const start = await page.request.post('/api/v1/runs', {
    headers: auth,
    data: { workflow: 'demo.order', input: {} },
  });
  expect(start.status()).toBe(403);

  await row.getByTestId('token-revoke').click();
  await expect(row.getByTestId('token-state')).toHaveText('revoked');
  expect((await page.request.get('/api/v1/runs', { headers: auth })).status()).toBe(401);
});

test('a globex viewer manages no tokens', async ({ page }) => {
  await login(page, GLOBEX_VIEWER);
  await expect(page.getByTestId('nav-tokens')).toHaveCount(0);
  const response = await page.request.post('/api/issue_token', {
    form: { name: 'sneaky', scope: 'read-write', expires_in_days: 'never' },
  });
  expect(response.status()).toBe(403);
});
