import { expect, test } from '@playwright/test';
import { ACME_ADMIN, OPERATOR, hydrated, login } from './helpers';

test('an operator pauses a tenant with a ceiling of 0, its new run queues with the reason shown, and raising the ceiling lets it run', async ({ browser }) => {
  const operator = await (await browser.newContext()).newPage();
  await login(operator, OPERATOR);
  await operator.goto('/operator');
  await hydrated(operator);

  // Lower acme's concurrency ceiling to 0, from the form that names a tenant.
  const fresh = operator.getByTestId('plan-form-new');
  await fresh.getByTestId('plan-tenant').fill('acme');
  await fresh.getByTestId('plan-max_concurrent_runs').fill('0');
  await fresh.getByTestId('plan-save').click();
  const acmePlan = operator.locator('[data-testid="plan-form"][data-tenant="acme"]');
  await expect(acmePlan.getByTestId('plan-max_concurrent_runs')).toHaveValue('0');
  // Usage sits beside the limit.
  await expect(acmePlan.getByTestId('usage-max_concurrent_runs')).toContainText('running');

  // acme starts a run: accepted, and queued with the quota as its reason.
  const admin = await (await browser.newContext()).newPage();
  await login(admin, ACME_ADMIN);
  await hydrated(admin);
  // The tenant sees its own plan and usage on its runs page.
  await expect(admin.getByTestId('plan-usage')).toContainText('of 0 runs running at once');
  await expect(admin.getByTestId('plan-retention')).toHaveText(
    'Finished runs are kept until deleted: your plan sets no retention.',
  );
  await admin.getByLabel('Workflow', { exact: true }).selectOption('demo.order');
  await admin.getByLabel('Input (JSON)').fill('{"item": "quota-e2e"}');
  await admin.getByRole('button', { name: 'Start run' }).click();
  await expect(admin).toHaveURL(/\/runs\/run_/);
  const status = admin.getByTestId('run-status');
  await expect(status).toHaveText('pending');
  await expect(admin.getByTestId('waiting')).toContainText('concurrency ceiling');
  // It stays queued while the ceiling holds.
  await admin.waitForTimeout(1500);
  await admin.reload();
  await expect(status).toHaveText('pending');

  // The operator raises the ceiling (blank: the default, unlimited): the run proceeds by itself.
  await acmePlan.getByTestId('plan-max_concurrent_runs').fill('');
  await acmePlan.getByTestId('plan-save').click();
  await expect(acmePlan.getByTestId('plan-max_concurrent_runs')).toHaveValue('');
  await expect(status).toHaveText('completed', { timeout: 20_000 });
});

test('a tenant user cannot save a plan', async ({ page }) => {
  await login(page, ACME_ADMIN);
  const response = await page.request.post('/api/save_plan', {
    form: {
      tenant: 'acme',
      'fields[max_concurrent_runs]': '1000',
      'fields[retention_days]': '',
    },
  });
  expect(response.status()).toBe(403);
});
