import { expect, test } from '@playwright/test';
import { ACME_ADMIN, hydrated, login } from './helpers';

test('an event published from the runs page reaches the waiting parcel and starts a triggered order', async ({ page }) => {
  await login(page, ACME_ADMIN);
  await hydrated(page);
  await page.getByLabel('Workflow', { exact: true }).selectOption('demo.parcel');
  await page.getByLabel('Input (JSON)').fill('{"order": "o-77"}');
  await page.getByRole('button', { name: 'Start run' }).click();
  await expect(page).toHaveURL(/\/runs\/run_/);
  const parcel = page.url();
  await expect(page.getByTestId('run-status')).toHaveText('suspended', { timeout: 20_000 });

  await page.goto('/');
  await hydrated(page);
  const panel = page.getByTestId('publish-panel');
  await panel.getByText('Publish an event…').click();
  await panel.getByTestId('event-name').fill('parcel.delivered');
  await panel.getByTestId('event-key').fill('o-77');
  await panel.getByTestId('event-payload').fill('{"at": "door"}');
  await panel.getByTestId('event-publish').click();
  await expect(panel.getByTestId('event-outcome')).toContainText('Reached 1 waiting run');

  // A bad payload is refused with the fix, and nothing is published.
  await panel.getByTestId('event-name').fill('order.placed');
  await panel.getByTestId('event-key').fill('');
  await panel.getByTestId('event-payload').fill('{oops');
  await panel.getByTestId('event-publish').click();
  await expect(panel.getByTestId('event-error')).toContainText('not valid JSON');

  await panel.getByTestId('event-payload').fill('{"item": "lamp", "delay_ms": 0}');
  await panel.getByTestId('event-id').fill('placed-77');
  await panel.getByTestId('event-publish').click();
  await expect(panel.getByTestId('event-outcome')).toContainText('started');
  await panel.getByTestId('event-started').first().click();
  await expect(page).toHaveURL(/\/runs\/evt_/);
  await expect(page.getByTestId('run-status')).toHaveText('completed', { timeout: 20_000 });

  await page.goto(parcel);
  await expect(page.getByTestId('run-status')).toHaveText('completed', { timeout: 20_000 });
});
