import { expect, type Browser, type Page } from '@playwright/test';

export const PASSWORD = 'e2e-demo-password';
export const ACME_ADMIN = 'admin@acme.test';
export const GLOBEX_VIEWER = 'viewer@globex.test';
export const OPERATOR = 'operator@durable.local';

/** Waits until the wasm has hydrated the page, so clicks reach the client code. */
export async function hydrated(page: Page) {
  await expect(page.locator('body[data-hydrated="true"]')).toHaveCount(1);
}

export async function login(page: Page, email: string) {
  await page.goto('/login');
  await hydrated(page);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Log in' }).click();
  await expect(page).toHaveURL(/\/$/);
  await expect(page.getByTestId('me-email')).toHaveText(email);
}

/** Run ids visible on the list page, by namespace, as the operator sees them. */
export async function runsByNamespace(browser: Browser): Promise<Map<string, string[]>> {
  const context = await browser.newContext();
  const page = await context.newPage();
  await login(page, OPERATOR);
  const rows = page.locator('tr[data-run-id]');
  await expect(rows.first()).toBeVisible();
  const byNs = new Map<string, string[]>();
  for (const row of await rows.all()) {
    const id = (await row.getAttribute('data-run-id'))!;
    const ns = (await row.getByTestId('run-namespace').textContent())!.trim();
    byNs.set(ns, [...(byNs.get(ns) ?? []), id]);
  }
  await context.close();
  return byNs;
}

export async function visibleRunIds(page: Page): Promise<string[]> {
  return page.locator('tr[data-run-id]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-run-id')!));
}
