import { expect, test } from '@playwright/test';
import { ACME_ADMIN, hydrated, login } from './helpers';

test('an order cancelled with compensation shows its compensations on the timeline, newest first', async ({ page }) => {
  await login(page, ACME_ADMIN);
  await hydrated(page);
  await page.getByLabel('Workflow', { exact: true }).selectOption('demo.order');
  await page.getByLabel('Input (JSON)').fill('{"item": "lamp", "delay_ms": 1500}');
  await page.getByRole('button', { name: 'Start run' }).click();
  await expect(page).toHaveURL(/\/runs\/run_/);
  await hydrated(page);

  // Once it has charged (ship is on the timeline), cancel with compensation.
  const rows = page.getByTestId('timeline-row');
  await expect(rows.filter({ hasText: 'order.ship' })).toHaveCount(1, { timeout: 20_000 });
  await page.getByText('Cancel this run…').click();
  await page.getByTestId('cancel-compensate').check();
  await page.getByTestId('cancel-confirm').click();

  await expect(page.getByTestId('run-status')).toHaveText('compensated', { timeout: 20_000 });
  const compensations = page.locator('[data-testid="timeline-row"][data-compensation="true"]');
  await expect(compensations).toHaveCount(2);
  await expect(compensations.nth(0)).toContainText('order.refund');
  await expect(compensations.nth(0)).toContainText('compensates #1');
  await expect(compensations.nth(1)).toContainText('order.release');
  await expect(compensations.nth(1)).toContainText('compensates #0');
});
