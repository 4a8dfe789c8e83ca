import { expect, test } from '@playwright/test';
import { ACME_ADMIN, GLOBEX_VIEWER, hydrated, login } from './helpers';

test('an acme admin creates a schedule, sees a bad cron refused as typed, triggers it and follows its run', async ({ page }) => {
  await login(page, ACME_ADMIN);
  await page.getByTestId('nav-schedules').click();
  await expect(page).toHaveURL(/\/schedules$/);
  await hydrated(page);

  const id = `e2e-${Date.now()}`;
  await page.getByTestId('schedule-id').fill(id);
  await page.getByTestId('schedule-workflow').fill('demo.order');
  await page.getByTestId('schedule-timezone').fill('Europe/Berlin');

  // Checked as typed: an hour of 25 is named, and no fire times show.
  const expression = page.getByTestId('schedule-expression');
  await expression.fill('0 25 * * *');
  await expect(page.getByTestId('schedule-preview-error')).toContainText('0 25 * * *');
  await expect(page.getByTestId('schedule-preview')).toHaveCount(0);

  // A valid one: its next five fire times, on Berlin's wall clock.
  await expression.fill('30 9 * * MON-FRI');
  await expect(page.getByTestId('schedule-preview-time')).toHaveCount(5);
  await expect(page.getByTestId('schedule-preview-time').first()).toContainText('09:30:00 CE');
  await expect(page.getByTestId('schedule-preview-error')).toHaveCount(0);

  await page.getByTestId('schedule-save').click();
  const row = page.getByTestId('schedule-row').filter({ hasText: id });
  await expect(row).toBeVisible();
  await expect(row.getByTestId('schedule-next').locator('li')).toHaveCount(5);

  // Trigger now, and follow the run it started.
  await row.getByTestId('schedule-trigger').click();
  await expect(page.getByTestId('schedule-acted')).toContainText('started a run');
  const link = page.getByTestId('schedule-run-link');
  const runId = (await link.textContent())!.trim();
  expect(runId.startsWith(`${id}-`)).toBeTruthy();
  await link.click();
  await expect(page).toHaveURL(new RegExp(`/runs/${runId}$`));
  await expect(page.getByTestId('run-status')).toHaveText('completed', { timeout: 20_000 });

  // Back on the list: the last tick names the run; paused, it shows no fire times.
  await page.goto('/schedules');
  await hydrated(page);
  const again = page.getByTestId('schedule-row').filter({ hasText: id });
  await expect(again.getByTestId('schedule-last')).toContainText(runId);
  await again.getByTestId('schedule-pause').click();
  await expect(again.getByTestId('schedule-paused')).toBeVisible();
  await again.getByTestId('schedule-delete').click();
  await expect(page.getByTestId('schedule-row').filter({ hasText: id })).toHaveCount(0);
});

test('a globex viewer sees schedules but creates and fires none', async ({ page }) => {
  await login(page, GLOBEX_VIEWER);
  await page.getByTestId('nav-schedules').click();
  await hydrated(page);
  await expect(page.getByTestId('schedule-save')).toHaveCount(0);
  const response = await page.request.post('/api/save_schedule', {
    form: {
      editing: '', id: 'sneaky', workflow: 'demo.order', kind: 'every', expression: '1m',
      timezone: 'UTC', overlap: 'skip', catchup_window: '1m', jitter: '0s', input: '{}',
    },
  });
  expect(response.status()).toBe(403);
});
