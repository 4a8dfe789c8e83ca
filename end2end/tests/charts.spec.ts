import { expect, test, type Page } from '@playwright/test';
import { ACME_ADMIN, GLOBEX_VIEWER, OPERATOR, hydrated, login } from './helpers';

const BURST = 12;

/** A number a chart's figure carries, read from a fresh load of `path` until it passes `min`. */
async function pollFigure(page: Page, path: string, figure: string, attr: string, min: number) {
  await expect
    .poll(
      async () => {
        await page.goto(path);
        return Number(await page.getByTestId(figure).getAttribute(attr));
      },
      { timeout: 30_000, intervals: [500, 1000, 2000] },
    )
    .toBeGreaterThanOrEqual(min);
}

/** Each of the charts `ids` lies inside the viewport's width. */
async function chartsFit(page: Page, width: number, ids = ['chart-throughput', 'chart-latency', 'chart-backlog']) {
  for (const id of ids) {
    const box = await page.getByTestId(id).boundingBox();
    expect(box, id).not.toBeNull();
    expect(box!.x).toBeGreaterThanOrEqual(0);
    expect(box!.x + box!.width).toBeLessThanOrEqual(width + 0.5);
    expect(box!.height).toBeGreaterThan(40);
  }
}

test('after a burst the operator sees throughput, latency and backlog charts with data, at 1280 and 390 px', async ({ browser }) => {
  const admin = await (await browser.newContext()).newPage();
  await login(admin, ACME_ADMIN);
  for (let i = 0; i < BURST; i++) {
    const started = await admin.request.post('/api/start_run', {
      form: { workflow: 'demo.order', input: JSON.stringify({ item: `burst-${i}`, qty: 1 }) },
    });
    expect(started.ok()).toBeTruthy();
  }

  for (const width of [1280, 390]) {
    const context = await browser.newContext({ viewport: { width, height: 900 } });
    const page = await context.newPage();
    await login(page, OPERATOR);
    // Starts are counted with the run; step run times reach the store within seconds.
    await pollFigure(page, '/operator', 'throughput', 'data-started', BURST);
    await pollFigure(page, '/operator', 'throughput', 'data-completed', BURST);
    await pollFigure(page, '/operator', 'latency', 'data-steps', BURST);
    await hydrated(page);

    const throughput = page.getByTestId('chart-throughput');
    await expect(throughput).toHaveAttribute('data-points', '60');
    await expect(throughput.getByTestId('chart-empty')).toHaveCount(0);
    await expect(throughput.locator('path[data-series="started"]')).toHaveAttribute('d', /^M.*L/);
    expect(Number(await throughput.getAttribute('data-max'))).toBeGreaterThanOrEqual(1);
    // Every point has a tooltip naming each series.
    await expect(throughput.locator('title')).toHaveCount(60);
    await expect(throughput.locator('title').last()).toContainText('started');
    const latency = page.getByTestId('chart-latency');
    await expect(latency.getByTestId('chart-empty')).toHaveCount(0);
    await expect(latency.locator('path[data-series="p95"]')).toHaveAttribute('d', /^M/);
    // The demo's runs waiting on a signal and on an external worker are the backlog's bars.
    const backlog = page.getByTestId('chart-backlog');
    await expect(backlog.locator('[data-testid="backlog-bar"][data-namespace="acme"]')).toHaveCount(1);
    await chartsFit(page, width);

    // The day's window: a point every fifteen minutes, the same burst in it.
    await page.getByTestId('window-day').click();
    await expect(page).toHaveURL(/window=day/);
    await expect(page.getByTestId('chart-throughput')).toHaveAttribute('data-points', '96');
    expect(Number(await page.getByTestId('throughput').getAttribute('data-started'))).toBeGreaterThanOrEqual(BURST);
    await expect(page.getByTestId('window-day')).toHaveAttribute('aria-current', 'true');
    await context.close();
  }
});

test("a tenant's runs page charts its own runs only, whatever namespace it asks for", async ({ browser }) => {
  const acme = await (await browser.newContext()).newPage();
  await login(acme, ACME_ADMIN);
  await expect(acme.getByTestId('chart-throughput')).toBeVisible();
  const acmeStarted = Number(await acme.getByTestId('throughput').getAttribute('data-started'));

  const viewer = await (await browser.newContext({ viewport: { width: 390, height: 800 } })).newPage();
  await login(viewer, GLOBEX_VIEWER);
  await expect(viewer.getByTestId('chart-throughput')).toBeVisible();
  const own = Number(await viewer.getByTestId('throughput').getAttribute('data-started'));
  // Every globex run started within the hour of this server's life, so its chart counts them all.
  const total = Number(await viewer.getByTestId('chip-all').locator('span').textContent());
  expect(own).toBe(total);
  expect(acmeStarted).toBeGreaterThan(own);
  // Asking for acme's, as an operator's filter would, still answers globex's.
  const asked = await viewer.request.post('/api/activity_charts', { form: { window: 'hour', ns: 'acme' } });
  expect(asked.ok()).toBeTruthy();
  expect((await asked.json()).started).toBe(own);
  await chartsFit(viewer, 390, ['chart-throughput', 'chart-latency']);
});
