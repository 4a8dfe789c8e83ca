import { expect, test, type Page } from '@playwright/test';
import { ACME_ADMIN, PASSWORD, hydrated } from './helpers';

/** Names of the wasm files the page fetches from now on (`durable.wasm`, `split___…`, `chunk_N.wasm`). */
function wasmFetched(page: Page): string[] {
  const names: string[] = [];
  page.on('request', (request) => {
    const file = new URL(request.url()).pathname.match(/^\/pkg\/(.+\.wasm)$/);
    if (file) names.push(file[1]);
  });
  return names;
}

/** `Cache-Control` of every `/pkg/` answer from now on, by path. */
function assetCaching(page: Page): Map<string, string | undefined> {
  const caching = new Map<string, string | undefined>();
  page.on('response', (response) => {
    const path = new URL(response.url()).pathname;
    if (path.startsWith('/pkg/')) caching.set(path, response.headers()['cache-control']);
  });
  return caching;
}

/** Whether a lazily loaded route's own chunk is among `names`. */
const fetchedRoute = (names: string[], route: string) =>
  names.some((name) => name.startsWith(`split___${route}_route_view_`));

const PAGES = ['login', 'runs', 'run_detail', 'operator', 'tokens', 'schedules'];

test("each page fetches its own code only: the login page's, then the list's, then a run's on the first visit to one", async ({ browser, page }) => {
  const errors: string[] = [];
  page.on('pageerror', (error) => errors.push(error.message));
  const fetched = wasmFetched(page);
  const caching = assetCaching(page);
  const onlyRoutes = (...expected: string[]) => {
    for (const route of PAGES) {
      expect(fetchedRoute(fetched, route), `${route}'s chunk fetched`).toBe(expected.includes(route));
    }
  };

  await page.goto('/login');
  await hydrated(page);
  expect(fetched).toContain('durable.wasm');
  onlyRoutes('login');

  await page.getByLabel('Email').fill(ACME_ADMIN);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Log in' }).click();
  await expect(page).toHaveURL(/\/$/);
  const row = page.locator('tr[data-run-id]').first();
  await expect(row).toBeVisible();
  onlyRoutes('login', 'runs');

  // A client-side move to a run: its page's chunk arrives, and the page works.
  const id = (await row.getAttribute('data-run-id'))!;
  await row.getByRole('link').first().click();
  await expect(page).toHaveURL(new RegExp(`/runs/${id}`));
  await expect(page.getByTestId('run-status')).toBeVisible();
  onlyRoutes('login', 'runs', 'run_detail');
  await page.getByRole('link', { name: '← All runs' }).click();
  await expect(page.locator(`tr[data-run-id="${id}"]`)).toBeVisible();

  // Main and chunks keep their names across builds: a browser revalidates them on every use, so
  // a cached main never meets a chunk of another build.
  expect(caching.size).toBeGreaterThan(3);
  for (const [path, cache] of caching) expect(cache, path).toBe('no-cache');
  expect(errors).toEqual([]);

  // A first load straight onto a run's page, in a fresh browser, hydrates it from its chunk.
  const context = await browser.newContext({ storageState: await page.context().storageState() });
  const fresh = await context.newPage();
  fresh.on('pageerror', (error) => errors.push(error.message));
  const freshFetched = wasmFetched(fresh);
  await fresh.goto(`/runs/${id}`);
  await hydrated(fresh);
  await expect(fresh.getByTestId('run-status')).toBeVisible();
  expect(fetchedRoute(freshFetched, 'run_detail')).toBe(true);
  expect(fetchedRoute(freshFetched, 'runs')).toBe(false);
  expect(errors).toEqual([]);
  await context.close();
});
