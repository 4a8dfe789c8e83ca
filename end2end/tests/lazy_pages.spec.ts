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

/** Whether a lazily loaded route's own chunk is among `names`. */
const fetchedRoute = (names: string[], route: string) =>
  names.some((name) => name.startsWith(`split___${route}_route_view_`));

const PAGES = ['login', 'runs', 'run_detail', 'operator', 'tokens', 'schedules'];

test("each page fetches its own code only: the login page's, then the list's, then a run's on the first visit to one", async ({ page }) => {
  const errors: string[] = [];
  page.on('pageerror', (error) => errors.push(error.message));
  const fetched = wasmFetched(page);
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
  await hydrated(page);
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

  // A first load straight onto a run's page hydrates it from its chunk too.
  await page.goto(`/runs/${id}`);
  await hydrated(page);
  await expect(page.getByTestId('run-status')).toBeVisible();
  expect(errors).toEqual([]);
});
