import { expect, test, type Page } from '@playwright/test';
import * as path from 'node:path';
import { ACME_ADMIN, GLOBEX_VIEWER, OPERATOR, PASSWORD, hydrated, login } from './helpers';

/** Screenshots land here (not committed), one per screen and width. */
const SHOTS = path.resolve(__dirname, '../output/screenshots');

async function shoot(page: Page, name: string) {
  // Measured once the page's stylesheet has loaded: an unstyled page is wider than any screen.
  await page.waitForLoadState('load');
  await page.waitForFunction(() =>
    [...document.styleSheets].some((sheet) => (sheet.href ?? '').includes('/pkg/durable.css') && sheet.cssRules.length > 0),
  );
  for (const [label, width] of [
    ['1280', 1280],
    ['390', 390],
  ] as const) {
    await page.setViewportSize({ width, height: 900 });
    // Nothing may stick out sideways at either width, except inside scrolling tables.
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    expect(overflow, `${name} at ${width}px is wider than the screen`).toBeLessThanOrEqual(0);
    await page.screenshot({ path: path.join(SHOTS, `${name}-${label}.png`), fullPage: true });
  }
  await page.setViewportSize({ width: 1280, height: 900 });
}

async function openFirst(page: Page, query: string): Promise<string> {
  await page.goto(`/?${query}`);
  await hydrated(page);
  const row = page.locator('tr[data-run-id]').first();
  await expect(row).toBeVisible();
  const id = (await row.getAttribute('data-run-id'))!;
  await row.getByRole('link').first().click();
  await expect(page).toHaveURL(new RegExp(`/runs/${id}`));
  return id;
}

test('run detail draws the child tree and a timeline; list, detail and retry form are captured at both widths', async ({ page }) => {
  await login(page, ACME_ADMIN);
  await shoot(page, 'runs-list');
  const parent = await openFirst(page, 'workflow=demo.fanout');
  await expect(page.getByTestId('run-status')).toHaveText('completed', { timeout: 20_000 });
  await page.reload();
  const tree = page.getByTestId('run-tree');
  // The parent and its three demo.order children.
  await expect(tree.getByTestId('tree-node')).toHaveCount(4);
  await expect(tree.locator(`[data-run-id="${parent}"] [aria-current="page"]`)).toHaveText(parent);
  const timeline = page.getByTestId('timeline');
  await expect(timeline.getByTestId('timeline-row')).toHaveCount(3);
  await expect(timeline.locator('[data-part="waited"]').first()).toBeVisible();

  // A child's page shows the same tree with the parent as a link, and its own step bars.
  await tree.locator('[data-testid="tree-node"] a').first().click();
  await expect(page).toHaveURL(/\.child\./);
  await expect(page.getByRole('link', { name: parent }).first()).toBeVisible();
  const bars = page.getByTestId('timeline').locator('[data-part="ran"]');
  await expect(bars).toHaveCount(3);
  await expect(page.getByTestId('timeline-row').first()).toContainText('order.reserve');
  // The retry form holds this run's input, not the page's we came from.
  await expect(page.getByTestId('retry-input')).toHaveValue(/"item": "item-\d"/);
  await shoot(page, 'run-detail');

  await openFirst(page, 'workflow=demo.flaky&status=failed');
  await hydrated(page);
  await page.getByTestId('retry-input').fill('{"ok": true, "note": "fixed"}');
  await expect(page.getByTestId('retry-diff')).toContainText('+ $.note: "fixed"');
  await shoot(page, 'retry-form');
});

test('a step nobody serves says so, and redispatch sends it again', async ({ page }) => {
  await login(page, ACME_ADMIN);
  await openFirst(page, 'workflow=demo.external');
  await expect(page.getByTestId('no-worker')).toContainText('no live worker serves `billing.invoice@acme`');
  await hydrated(page);
  await page.getByTestId('redispatch').click();
  await expect(page.getByTestId('redispatched')).toContainText('Sent 1 waiting step');
  await expect(page.getByTestId('run-status')).toHaveText('suspended');
});

test('a blocked run says why, and continue drives it again until it parks with the reason', async ({ page }) => {
  await login(page, ACME_ADMIN);
  const id = await openFirst(page, 'status=blocked');
  await expect(page.getByTestId('waiting')).toContainText('a process that serves its version');
  await hydrated(page);
  await page.getByTestId('continue').click();
  await expect(page.getByTestId('action-error')).toHaveCount(0);
  await expect(page).toHaveURL(new RegExp(`/runs/${id}$`));
  await expect(page.getByTestId('run-status')).toHaveText('blocked', { timeout: 20_000 });
});

test('bulk cancel previews its count, acts on the filtered runs only, and leaves other tenants alone', async ({ page, browser }) => {
  await login(page, ACME_ADMIN);
  await hydrated(page);
  for (let i = 0; i < 2; i++) {
    await page.getByLabel('Workflow', { exact: true }).selectOption('demo.sleepy');
    await page.getByLabel('Input (JSON)').fill('{"seconds": 600}');
    await page.getByRole('button', { name: 'Start run' }).click();
    await expect(page).toHaveURL(/\/runs\/run_/);
    await page.goto('/');
    await hydrated(page);
  }
  await page.goto('/?workflow=demo.sleepy');
  await hydrated(page);
  await page.getByTestId('bulk-cancel').click();
  const preview = page.getByTestId('bulk-preview');
  await expect(preview).toHaveAttribute('data-count', '2');
  await expect(preview).toContainText('This will cancel 2 runs');
  await page.getByTestId('bulk-confirm').click();
  await expect(page.getByTestId('bulk-done')).toHaveText('Cancelled 2 runs.');
  await expect(page.locator('tr[data-run-id] [data-status="cancelled"]')).toHaveCount(2);
  await page.getByTestId('bulk-cancel').click();
  await expect(page.getByTestId('bulk-preview')).toHaveAttribute('data-count', '0');
  await expect(page.getByTestId('bulk-confirm')).toHaveCount(0);

  // globex's demo.sleepy run is untouched.
  const operator = await browser.newPage();
  await login(operator, OPERATOR);
  await operator.goto('/?ns=globex&workflow=demo.sleepy');
  await expect(operator.locator('tr[data-run-id] [data-status="cancelled"]')).toHaveCount(0);
  await expect(operator.locator('tr[data-run-id]')).not.toHaveCount(0);
  await operator.close();
});

test('the operator view shows every namespace with its load and the live workers; tenants cannot open it', async ({ page, browser }) => {
  await login(page, OPERATOR);
  await page.getByTestId('nav-operator').click();
  await expect(page).toHaveURL(/\/operator$/);
  const loads = page.getByTestId('load-row');
  await expect(page.locator('[data-testid="load-row"][data-namespace="acme"]')).toBeVisible();
  await expect(page.locator('[data-testid="load-row"][data-namespace="globex"]')).toBeVisible();
  expect(await loads.count()).toBeGreaterThanOrEqual(2);
  await expect(page.locator('[data-testid="worker-row"][data-token="order.charge@*"]')).toBeVisible();
  await shoot(page, 'operator');
  // A namespace links to its runs, filtered.
  await page.locator('[data-testid="load-row"][data-namespace="globex"] a').first().click();
  await expect(page).toHaveURL(/ns=globex/);
  for (const ns of await page.getByTestId('run-namespace').allTextContents()) expect(ns.trim()).toBe('globex');

  const admin = await browser.newPage();
  await login(admin, ACME_ADMIN);
  await expect(admin.getByTestId('nav-operator')).toHaveCount(0);
  await admin.goto('/operator');
  await expect(admin.getByRole('alert')).toContainText('your role cannot do this');
  await admin.close();
});

test('the globex viewer cannot reach an acme run by server function or live stream', async ({ page, browser }) => {
  const acme = await browser.newPage();
  await login(acme, ACME_ADMIN);
  const acmeRun = await openFirst(acme, 'workflow=demo.order');

  await login(page, GLOBEX_VIEWER);
  const call = await page.request.post('/api/get_run_detail', { form: { id: acmeRun } });
  expect(call.status()).toBe(200);
  const body = await call.json();
  expect(body[1]).toBeNull();
  expect(JSON.stringify(body)).not.toContain(acmeRun);

  // Listen to globex's live stream while acme starts a run that emits events.
  await page.evaluate(() => {
    const seen: string[] = [];
    (window as any).__seen = seen;
    const source = new EventSource('/events');
    source.onmessage = (e) => seen.push(e.data);
    (window as any).__source = source;
  });
  await page.waitForFunction(() => (window as any).__source.readyState === 1);
  await acme.goto('/');
  await hydrated(acme);
  await acme.getByLabel('Workflow', { exact: true }).selectOption('demo.order');
  await acme.getByLabel('Input (JSON)').fill('{"delay_ms": 50}');
  await acme.getByRole('button', { name: 'Start run' }).click();
  await expect(acme).toHaveURL(/\/runs\/run_/);
  const started = acme.url().split('/runs/')[1];
  await expect(acme.getByTestId('run-status')).toHaveText('completed', { timeout: 20_000 });
  const seen: string[] = await page.evaluate(() => (window as any).__seen);
  for (const data of seen) {
    expect(data).not.toContain(started);
    expect(data).not.toContain('"acme"');
  }
  await acme.close();
});

test('log out everywhere ends the other sessions of the account, and their live streams', async ({ page, browser }) => {
  await login(page, ACME_ADMIN);
  const other = await browser.newContext();
  const second = await other.newPage();
  await login(second, ACME_ADMIN);
  // The other session listens to its live stream, and notes when the server ends it.
  const opened = await second.evaluate(async () => {
    (window as any).__ended = false;
    const response = await fetch('/events');
    void (async () => {
      const reader = response.body!.getReader();
      while (!(await reader.read()).done) {}
      (window as any).__ended = true;
    })();
    return response.status;
  });
  expect(opened, 'the stream was open before the logout').toBe(200);
  await hydrated(page);
  await page.getByTestId('logout-everywhere').click();
  await expect(page).toHaveURL(/\/login$/);
  // The stream is ended within the server's session re-check (5 s), not left running.
  await second.waitForFunction(() => (window as any).__ended === true, null, { timeout: 15_000 });
  await second.goto('/');
  await expect(second).toHaveURL(/\/login$/);
  const call = await second.request.post('/api/get_run_detail', { form: { id: 'run_x' } });
  expect(call.status()).toBe(401);
  await other.close();
});

test('repeated failed logins are refused for a while, with a message that says so', async ({ page }) => {
  const email = `nobody-${Date.now()}@acme.test`;
  await page.goto('/login');
  await hydrated(page);
  for (let i = 0; i < 5; i++) {
    await page.getByLabel('Email').fill(email);
    await page.getByLabel('Password').fill('wrong password');
    await page.getByRole('button', { name: 'Log in' }).click();
    await expect(page.getByTestId('login-error')).toHaveText('wrong email or password');
  }
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Log in' }).click();
  await expect(page.getByTestId('login-error')).toContainText('too many failed logins');
  // The limit is per email: the demo admin still gets in.
  await login(page, ACME_ADMIN);
});

async function startFromList(page: Page, workflow: string, input: string): Promise<string> {
  await page.goto('/');
  await hydrated(page);
  await page.getByLabel('Workflow', { exact: true }).selectOption(workflow);
  await page.getByLabel('Input (JSON)').fill(input);
  await page.getByRole('button', { name: 'Start run' }).click();
  await expect(page).toHaveURL(/\/runs\/run_/);
  await hydrated(page);
  return page.url().split('/runs/')[1];
}

test('signal, cancel behind its confirmation, retry, and bulk retry each do what they say', async ({ page }) => {
  await login(page, ACME_ADMIN);

  // Signal: a fresh approval run completes with the payload sent from the form.
  await startFromList(page, 'demo.approval', '{}');
  await expect(page.getByTestId('run-status')).toHaveText('suspended');
  await page.getByLabel('Signal name').fill('approve');
  await page.getByLabel('Signal payload (JSON)').fill('{"by": "e2e"}');
  await page.getByRole('button', { name: 'Send signal' }).click();
  await expect(page.getByTestId('run-status')).toHaveText('completed', { timeout: 20_000 });
  await expect(page.getByTestId('run-output')).toContainText('"by": "e2e"');

  // A signal with a malformed payload is refused with what to fix, and sends nothing.
  const waiting = await startFromList(page, 'demo.approval', '{}');
  await page.getByLabel('Signal name').fill('approve');
  await page.getByLabel('Signal payload (JSON)').fill('{by: e2e');
  await page.getByRole('button', { name: 'Send signal' }).click();
  await expect(page.getByTestId('action-error')).toContainText('not valid JSON');
  await page.goto(`/runs/${waiting}`);
  await expect(page.getByTestId('run-status')).toHaveText('suspended');

  // Cancel: nothing happens until the confirmation is given.
  await startFromList(page, 'demo.sleepy', '{"seconds": 600}');
  await expect(page.getByTestId('run-status')).toHaveText('suspended');
  await page.getByText('Cancel this run…').click();
  await page.getByRole('button', { name: 'Yes, cancel it' }).click();
  await expect(page.getByTestId('run-status')).toHaveText('cancelled', { timeout: 20_000 });

  // Retry from the last good checkpoint: a failed demo.flaky run goes again (and fails again,
  // its input unchanged), with one more turn.
  const flaky = await startFromList(page, 'demo.flaky', '{"ok": false}');
  await expect(page.getByTestId('run-status')).toHaveText('failed', { timeout: 20_000 });
  await page.getByRole('button', { name: 'Retry from the last good checkpoint' }).click();
  await expect(page.getByTestId('action-error')).toHaveCount(0);
  await expect(page).toHaveURL(new RegExp(`/runs/${flaky}$`));
  await expect(page.getByTestId('run-status')).toHaveText('failed', { timeout: 20_000 });

  // Bulk retry over a filter: the preview counts acme's failed flaky runs, the action retries them.
  await page.goto('/?workflow=demo.flaky&status=failed');
  await hydrated(page);
  await page.getByTestId('bulk-retry').click();
  const preview = page.getByTestId('bulk-preview');
  await expect(preview).toContainText('This will retry');
  const count = Number(await preview.getAttribute('data-count'));
  expect(count).toBeGreaterThanOrEqual(2);
  await page.getByTestId('bulk-confirm').click();
  await expect(page.getByTestId('bulk-done')).toContainText(`Retried ${count} runs.`);
});

test('a forged bulk action cannot reach another tenant, and a viewer cannot act in bulk at all', async ({ page, browser }) => {
  // acme's admin names globex in the namespace filter of a forged bulk cancel: the filter is
  // ignored for a tenant, so only acme's runs could match, and globex's sleepy run is untouched.
  await login(page, ACME_ADMIN);
  const forged = await page.request.post('/api/bulk_act', {
    form: { verb: 'cancel', expected: '500', 'filters[ns]': 'globex', 'filters[workflow]': 'demo.sleepy' },
  });
  expect(forged.status()).toBeLessThan(500);
  const operator = await browser.newPage();
  await login(operator, OPERATOR);
  await operator.goto('/?ns=globex&workflow=demo.sleepy');
  await expect(operator.locator('tr[data-run-id]')).not.toHaveCount(0);
  await expect(operator.locator('tr[data-run-id] [data-status="cancelled"]')).toHaveCount(0);
  await operator.close();

  // A viewer's forged bulk action is refused, and an unknown bulk verb gets a clear error.
  const viewer = await browser.newPage();
  await login(viewer, GLOBEX_VIEWER);
  const refused = await viewer.request.post('/api/bulk_act', {
    form: { verb: 'cancel', expected: '500', 'filters[workflow]': 'demo.sleepy' },
  });
  expect(refused.status()).toBe(403);
  await viewer.close();
  const unknown = await page.request.post('/api/bulk_act', { form: { verb: 'delete', expected: '1' } });
  expect(unknown.status()).toBe(400);
  expect(await unknown.text()).toContain('unknown bulk action');
});
