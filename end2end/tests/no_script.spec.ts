import { expect, test } from '@playwright/test';
import { ACME_ADMIN, OPERATOR, PASSWORD } from './helpers';

// With JavaScript off the pages are plain HTML: their data is in what the server sends, forms
// post to the server and its answer is a redirect back.
test.use({ javaScriptEnabled: false });

test('with JavaScript off a tenant logs in, sees its runs, opens one and cancels it', async ({ page }) => {
  // A refused form comes back with its error, as a hydrated form shows it.
  await page.goto('/login');
  await page.getByLabel('Email').fill(ACME_ADMIN);
  await page.getByLabel('Password').fill('not-the-password');
  await page.getByRole('button', { name: 'Log in' }).click();
  await expect(page).toHaveURL(/\/login\?/);
  await expect(page.getByTestId('login-error')).toHaveText('wrong email or password');

  await page.getByLabel('Email').fill(ACME_ADMIN);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Log in' }).click();
  await expect(page).toHaveURL(/\/$/);
  await expect(page.getByTestId('me-email')).toHaveText(ACME_ADMIN);
  await expect(page.locator('body[data-hydrated]')).toHaveCount(0);

  // A run waiting for an approval signal, started as the form would.
  const started = await page.request.post('/api/start_run', {
    maxRedirects: 0,
    form: { workflow: 'demo.approval', input: JSON.stringify({ request: 'no-script chair' }) },
  });
  const location = started.headers()['location'];
  expect(location, `start answered ${started.status()}`).toMatch(/^\/runs\//);
  const id = location.split('/').pop()!;
  expect(id).toMatch(/^run_/);

  await page.goto('/');
  const row = page.locator(`tr[data-run-id="${id}"]`);
  await expect(row).toBeVisible();
  await expect(page.getByTestId('chart-throughput')).toBeVisible();
  await row.getByRole('link', { name: id }).click();
  await expect(page).toHaveURL(new RegExp(`/runs/${id}$`));
  await expect(page.getByTestId('run-id')).toContainText(id);
  await expect(page.getByTestId('run-status')).toContainText(/suspended|running|pending/);

  // A signal with a payload that is not JSON is refused with the reason, and nothing is sent.
  await page.getByLabel('Signal name').fill('approve');
  await page.getByLabel('Signal payload (JSON)').fill('{"ok": ');
  await page.getByRole('button', { name: 'Send signal' }).click();
  await expect(page.getByTestId('form-error')).toContainText('not valid JSON');
  await expect(page.getByTestId('run-status')).toContainText(/suspended|running|pending/);

  // The confirmation is a native <details>; the form posts and the server redirects back.
  await page.getByText('Cancel this run…').click();
  await page.getByTestId('cancel-confirm').click();
  await expect(page).toHaveURL(new RegExp(`/runs/${id}$`));
  await expect(page.getByTestId('run-status')).toContainText(/cancel/);
  await expect
    .poll(async () => {
      await page.reload();
      return page.getByTestId('run-status').textContent();
    })
    .toContain('cancelled');
});

test('with JavaScript off the operator screen shows every namespace and its charts', async ({ page }) => {
  await page.goto('/login');
  await page.getByLabel('Email').fill(OPERATOR);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Log in' }).click();
  await expect(page).toHaveURL(/\/$/);
  await expect(page.locator('tr[data-run-id]').first()).toBeVisible();
  await page.goto('/operator');
  await expect(page.locator('[data-testid="load-row"][data-namespace="acme"]')).toBeVisible();
  await expect(page.getByTestId('chart-backlog')).toBeVisible();
  await expect(page.getByTestId('chart-latency')).toBeVisible();
  // The window is a plain link.
  await page.getByTestId('window-day').click();
  await expect(page.getByTestId('chart-throughput')).toHaveAttribute('data-points', '96');
});
