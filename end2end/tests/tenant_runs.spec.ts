import { expect, test } from '@playwright/test';
import { ACME_ADMIN, GLOBEX_VIEWER, hydrated, login, runsByNamespace, visibleRunIds } from './helpers';

test('the acme admin sees only acme runs, starts demo.order and watches it complete live', async ({ page, browser }) => {
  const byNs = await runsByNamespace(browser);
  const acmeIds = byNs.get('acme') ?? [];
  const globexIds = byNs.get('globex') ?? [];
  expect(acmeIds.length).toBeGreaterThan(0);
  expect(globexIds.length).toBeGreaterThan(0);

  await login(page, ACME_ADMIN);
  await expect(page.getByTestId('me-scope')).toContainText('tenant acme');
  const visible = await visibleRunIds(page);
  expect(visible.length).toBeGreaterThan(0);
  for (const id of visible) expect(acmeIds).toContain(id);
  for (const id of globexIds) expect(visible).not.toContain(id);

  await expect(page.locator('body[data-live="connected"]')).toHaveCount(1);
  // A marker that a full page load would wipe out.
  await page.evaluate(() => ((window as any).__sameDocument = true));
  await page.getByLabel('Workflow', { exact: true }).selectOption('demo.order');
  await page.getByLabel('Input (JSON)').fill('{"item": "e2e", "delay_ms": 600}');
  await page.getByRole('button', { name: 'Start run' }).click();
  await expect(page).toHaveURL(/\/runs\/run_/);
  const status = page.getByTestId('run-status');
  await expect(status).not.toHaveText('completed');
  await expect(status).toHaveText('completed', { timeout: 20_000 });
  await expect(page.getByTestId('checkpoints').locator('[data-testid="checkpoint-status"]')).toHaveText([
    'completed',
    'completed',
    'completed',
  ]);
  expect(await page.evaluate(() => (window as any).__sameDocument)).toBe(true);
});

test('the globex viewer finds none of acme runs, by page or by URL, and cannot start runs', async ({ page, browser }) => {
  const byNs = await runsByNamespace(browser);
  const acmeIds = byNs.get('acme') ?? [];
  expect(acmeIds.length).toBeGreaterThan(0);

  await login(page, GLOBEX_VIEWER);
  await expect(page.getByTestId('me-scope')).toContainText('tenant globex');
  const visible = await visibleRunIds(page);
  for (const id of acmeIds) expect(visible).not.toContain(id);
  await expect(page.getByRole('button', { name: 'Start run' })).toHaveCount(0);

  for (const id of acmeIds) {
    const response = await page.goto(`/runs/${id}`);
    expect(response?.status()).toBe(404);
    await expect(page.getByTestId('run-not-found')).toBeVisible();
    await expect(page.getByText(id)).toHaveCount(0);
  }
});

test('the acme admin naming globex in the URL still sees only acme runs', async ({ page, browser }) => {
  const byNs = await runsByNamespace(browser);
  const globexIds = byNs.get('globex') ?? [];
  expect(globexIds.length).toBeGreaterThan(0);

  await login(page, ACME_ADMIN);
  // The `ns` filter is an operator's; a tenant's scope is its session's, whatever the URL says.
  const response = await page.goto('/?ns=globex');
  expect(response?.status()).toBe(200);
  await expect(page.getByTestId('me-scope')).toContainText('tenant acme');
  await expect(page.locator('tr[data-run-id]').first()).toBeVisible();
  const visible = await visibleRunIds(page);
  for (const id of globexIds) expect(visible).not.toContain(id);
});

test('the operator sees both tenants with a namespace column', async ({ browser }) => {
  const byNs = await runsByNamespace(browser);
  expect([...byNs.keys()]).toEqual(expect.arrayContaining(['acme', 'globex']));
});

test('malformed JSON on the start form gets a clear error and creates nothing', async ({ page }) => {
  await login(page, ACME_ADMIN);
  const before = await visibleRunIds(page);
  await page.getByLabel('Workflow', { exact: true }).selectOption('demo.order');
  await page.getByLabel('Input (JSON)').fill('{"item": ');
  const [response] = await Promise.all([
    page.waitForResponse((r) => r.request().method() === 'POST' && r.url().includes('/api/start_run')),
    page.getByRole('button', { name: 'Start run' }).click(),
  ]);
  expect(response.status()).toBe(400);
  await expect(page.getByTestId('start-error')).toContainText('not valid JSON');
  await expect(page).toHaveURL(/\/$/);
  await page.reload();
  await hydrated(page);
  expect(await visibleRunIds(page)).toEqual(before);
});

test('a wrong password is refused with a message', async ({ page }) => {
  await page.goto('/login');
  await hydrated(page);
  await page.getByLabel('Email').fill(ACME_ADMIN);
  await page.getByLabel('Password').fill('not-the-password');
  await page.getByRole('button', { name: 'Log in' }).click();
  await expect(page.getByTestId('login-error')).toHaveText('wrong email or password');
  const response = await page.goto('/');
  expect(page.url()).toMatch(/\/login$/);
  expect(response?.status()).toBe(200);
});

test('filters live in the URL: a facet narrows the list, survives a reload, and bad input says what to do', async ({ page }) => {
  await login(page, ACME_ADMIN);
  await hydrated(page);
  const flaky = page.getByTestId('facet-workflow-demo.flaky');
  await expect(flaky).toBeVisible();
  await flaky.click();
  await expect(page).toHaveURL(/[?&]workflow=demo\.flaky/);
  await expect(page.locator('tr[data-run-id]').first()).toBeVisible();
  const workflows = await page.locator('tr[data-run-id] td:nth-child(2)').allTextContents();
  expect(workflows.length).toBeGreaterThan(0);
  for (const w of workflows) expect(w).toContain('demo.flaky');

  await page.reload();
  await hydrated(page);
  await expect(page.getByLabel('Filter by workflow')).toHaveValue('demo.flaky');
  for (const w of await page.locator('tr[data-run-id] td:nth-child(2)').allTextContents()) expect(w).toContain('demo.flaky');

  await page.getByLabel('Filter by tag').fill('no-such-tag');
  await page.getByLabel('Filter by tag').press('Enter');
  await expect(page).toHaveURL(/[?&]tag=no-such-tag/);
  await expect(page.getByTestId('runs-empty')).toContainText('No runs match these filters');

  await page.getByRole('link', { name: 'Clear filters' }).click();
  await expect(page).toHaveURL(/\/$/);
  await expect(page.locator('tr[data-run-id]').first()).toBeVisible();

  await page.goto('/?attr=oops');
  await expect(page.getByRole('alert')).toContainText('must look like key=value');
  await page.goto('/?from=yesterday');
  await expect(page.getByRole('alert')).toContainText('use YYYY-MM-DD');
});

test('a waiting run says what it waits for', async ({ page }) => {
  await login(page, ACME_ADMIN);
  // Waiting ones only: other specs approve the approvals they start.
  await page.goto('/?workflow=demo.approval&status=suspended');
  await hydrated(page);
  const row = page.locator('tr[data-run-id]').first();
  await expect(row).toBeVisible();
  await row.getByRole('link').click();
  await expect(page).toHaveURL(/\/runs\/run_/);
  await expect(page.getByTestId('waiting')).toContainText('signal `approve`');
});

test('retry with edited input turns a failed demo.flaky run into a completed one linked to it', async ({ page }) => {
  await login(page, ACME_ADMIN);
  await page.goto('/?workflow=demo.flaky&status=failed');
  await hydrated(page);
  const row = page.locator('tr[data-run-id]').first();
  await expect(row).toBeVisible();
  const original = (await row.getAttribute('data-run-id'))!;
  await row.getByRole('link').click();
  await expect(page.getByTestId('run-status')).toHaveText('failed');
  await hydrated(page);
  const input = page.getByLabel('Retry with this input');
  await expect(input).toHaveValue(/"ok": false/);
  // Typing is checked as it goes: broken JSON disables the button and says why.
  await input.fill('{"ok": tru');
  await expect(page.getByTestId('retry-input-invalid')).toContainText('Not valid JSON');
  await expect(page.getByTestId('retry-with-input')).toBeDisabled();
  await input.fill('{"ok": true}');
  await expect(page.getByTestId('retry-diff')).toHaveText('~ $.ok: false → true');
  await page.getByRole('button', { name: 'Retry with 1 change' }).click();
  await expect(page).not.toHaveURL(new RegExp(`/runs/${original}$`));
  await expect(page.getByRole('link', { name: original })).toBeVisible();
  await expect(page.getByTestId('run-status')).toHaveText('completed', { timeout: 20_000 });
});

test('a viewer sees no actions and a forged one is refused; an admin cannot act across tenants', async ({ page, browser }) => {
  await login(page, GLOBEX_VIEWER);
  // A finished run, so its status cannot change while the test looks.
  await page.goto('/?status=completed');
  await hydrated(page);
  const row = page.locator('tr[data-run-id]').first();
  await expect(row).toBeVisible();
  const globexRun = (await row.getAttribute('data-run-id'))!;
  await row.getByRole('link').click();
  const status = page.getByTestId('run-status');
  await expect(status).toBeVisible();
  const before = await status.textContent();
  await expect(page.getByTestId('actions')).toHaveCount(0);
  const forged = await page.request.post('/api/act_on_run', { form: { id: globexRun, verb: 'cancel' } });
  expect(forged.status()).toBe(403);
  await page.reload();
  await expect(page.getByTestId('run-status')).toHaveText(before!);

  const admin = await browser.newPage();
  await login(admin, ACME_ADMIN);
  const across = await admin.request.post('/api/act_on_run', { form: { id: globexRun, verb: 'cancel' } });
  expect(across.status()).toBe(400);
  expect(await across.text()).toContain('visible');
  await admin.close();
  await page.reload();
  await expect(page.getByTestId('run-status')).toHaveText(before!);
});

test('a request another site makes the browser send is refused (CSRF)', async ({ page }) => {
  await login(page, ACME_ADMIN);
  // A run still waiting (another spec may have cancelled the newest approval).
  await page.goto('/?workflow=demo.approval&status=suspended');
  await hydrated(page);
  const row = page.locator('tr[data-run-id]').first();
  await expect(row).toBeVisible();
  const id = (await row.getAttribute('data-run-id'))!;
  const forged = await page.request.post('/api/act_on_run', {
    headers: { Origin: 'https://evil.example' },
    form: { id, verb: 'cancel' },
  });
  expect(forged.status()).toBe(403);
  await page.goto(`/runs/${id}`);
  await expect(page.getByTestId('run-status')).not.toHaveText('cancelled');
});
