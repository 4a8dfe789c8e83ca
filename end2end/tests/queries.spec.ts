import { expect, test } from '@playwright/test';
import { ACME_ADMIN, hydrated, login } from './helpers';

test('an approval answers its state query, refuses an empty update, then takes one and completes', async ({ page }) => {
  await login(page, ACME_ADMIN);
  await hydrated(page);
  await page.getByLabel('Workflow', { exact: true }).selectOption('demo.approval');
  await page.getByLabel('Input (JSON)').fill('{"request": "standing desk"}');
  await page.getByRole('button', { name: 'Start run' }).click();
  await expect(page).toHaveURL(/\/runs\/run_/);
  await hydrated(page);

  const box = page.getByTestId('query-box');
  await box.getByTestId('query-name').fill('state');
  await box.getByTestId('query-send').click();
  await expect(box.getByTestId('query-result')).toContainText('"waiting"');
  await expect(box.getByTestId('query-result')).toContainText('standing desk');

  // An unknown query says which ones the workflow has.
  await box.getByTestId('query-name').fill('status');
  await box.getByTestId('query-send').click();
  await expect(box.getByTestId('query-error')).toContainText('it registers: state');

  // The update's handler refuses an empty approver; nothing changes.
  await box.getByTestId('query-kind').selectOption('update');
  await box.getByTestId('query-name').fill('approve');
  await box.getByTestId('query-argument').fill('{"by": ""}');
  await box.getByTestId('query-send').click();
  await expect(box.getByTestId('query-error')).toContainText('`by` must name who approves');
  await expect(page.getByTestId('run-status')).toHaveText('suspended');

  // Accepted: its reply shows, and the run takes the approval and completes.
  await box.getByTestId('query-argument').fill('{"by": "ann"}');
  await box.getByTestId('query-send').press('Enter');
  await expect(box.getByTestId('query-result')).toContainText('"by": "ann"');
  await expect(page.getByTestId('run-status')).toHaveText('completed', { timeout: 20_000 });
});
