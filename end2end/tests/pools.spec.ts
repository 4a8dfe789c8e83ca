import { expect, test } from '@playwright/test';
import { ACME_ADMIN, GLOBEX_VIEWER, OPERATOR, hydrated, login } from './helpers';

test('an acme admin creates a pool, sees its partition and worker command, relabels and deletes it', async ({ page }) => {
  await login(page, ACME_ADMIN);
  await page.getByTestId('nav-pools').click();
  await expect(page).toHaveURL(/\/pools$/);
  await hydrated(page);

  const name = `e2e-${Date.now()}`;
  await page.getByTestId('pool-name').fill(name);
  await page.getByTestId('pool-labels').fill('region=eu, gpu=a100');
  await page.getByTestId('pool-save').click();
  await expect(page.getByTestId('pool-saved')).toContainText(`partition acme.${name}`);
  const row = page.getByTestId('pool-row').filter({ hasText: name });
  await expect(row.getByTestId('pool-partition')).toHaveText(`acme.${name}`);
  await expect(row).toContainText(`durable worker --tenant acme --pool ${name}`);
  await expect(row.getByTestId('pool-labels-shown')).toHaveText('gpu=a100, region=eu');
  await expect(row.getByTestId('pool-no-workers')).toBeVisible();

  // A label not written key=value is refused, saying how to write it; nothing changes.
  await page.getByTestId('pool-name').fill(name);
  await page.getByTestId('pool-labels').fill('nope');
  await page.getByTestId('pool-save').click();
  await expect(page.getByTestId('pool-error')).toContainText('key=value');
  await expect(row.getByTestId('pool-labels-shown')).toHaveText('gpu=a100, region=eu');

  // The same name replaces its labels.
  await page.getByTestId('pool-labels').fill('region=us');
  await page.getByTestId('pool-save').click();
  await expect(row.getByTestId('pool-labels-shown')).toHaveText('region=us');

  await row.getByTestId('pool-delete').click();
  await expect(page.getByTestId('pool-row').filter({ hasText: name })).toHaveCount(0);
});

test('a globex viewer sees its own pools only, and creates none', async ({ page }) => {
  await login(page, GLOBEX_VIEWER);
  await page.getByTestId('nav-pools').click();
  await hydrated(page);
  await expect(page.getByTestId('pool-save')).toHaveCount(0);
  await expect(page.getByTestId('pools-empty')).toContainText('durable worker --tenant globex');
  const response = await page.request.post('/api/save_pool', {
    form: { name: 'sneaky', labels: '' },
  });
  expect(response.status()).toBe(403);
});

test('the operator shares a pool with acme, whose admin sees it among its pools, marked shared', async ({ page, browser }) => {
  const name = `shared-${Date.now()}`;
  await login(page, OPERATOR);
  await page.getByTestId('nav-pools').click();
  await hydrated(page);
  await page.getByTestId('shared-name').fill(name);
  await page.getByTestId('shared-labels').fill('gpu=a100');
  await page.getByTestId('shared-save').click();
  await expect(page.getByTestId('pool-saved')).toContainText(`shared pool ${name} created`);
  const row = page.getByTestId('shared-row').filter({ hasText: name });
  await expect(row).toContainText(`durable worker --pool ${name}`);
  await row.getByTestId('shared-grant-tenant').fill('acme');
  await row.getByTestId('shared-grant-save').click();
  await expect(row.getByTestId('shared-grant')).toContainText('acme');

  const acme = await (await browser.newContext()).newPage();
  await login(acme, ACME_ADMIN);
  await acme.getByTestId('nav-pools').click();
  await hydrated(acme);
  const theirs = acme.getByTestId('pool-row').filter({ hasText: name });
  await expect(theirs.getByTestId('pool-shared')).toBeVisible();
  await expect(theirs.getByTestId('pool-partition')).toHaveText(`acme.${name}`);
  await expect(theirs.getByTestId('pool-delete')).toHaveCount(0);

  // Deleting it while granted is refused, naming the grant; taken back, it goes.
  await row.getByTestId('shared-delete').click();
  await expect(page.getByTestId('pool-error')).toContainText('granted to acme');
  await row.getByTestId('shared-revoke').click();
  await expect(row.getByTestId('shared-grant')).toHaveCount(0);
  await row.getByTestId('shared-delete').click();
  await expect(page.getByTestId('shared-row').filter({ hasText: name })).toHaveCount(0);
});
