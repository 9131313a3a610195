import assert from 'node:assert/strict';
import { existsSync, mkdirSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { chromium, type Browser, type Download, type Page } from 'playwright-core';
import sharp from 'sharp';
import yauzl from 'yauzl';
import { CORPUS, startTestServer, type TestServer } from './helpers/server.ts';

const CHROMIUM = '/usr/bin/chromium';
const ARTIFACTS = new URL('./artifacts/', import.meta.url).pathname;
const JPG = join(CORPUS, 'jpg/jpeg420exif.jpg'); // 2048×1536
const PNG = join(CORPUS, 'png/baiona_alpha.png');
const missing = existsSync(CHROMIUM) ? false : `${CHROMIUM} is not installed (Debian package "chromium"; scripts/setup.mjs installs it)`;

let server: TestServer;
let browser: Browser;
let page: Page;
const pageErrors: string[] = [];
const foreignRequests: string[] = [];

async function shot(name: string): Promise<void> {
  await page.screenshot({ path: join(ARTIFACTS, `ui-${name}.png`), fullPage: true });
}

async function apiBytes(jobId: string): Promise<Buffer> {
  const res = await server.api(`/compress/job/${jobId}/download`);
  assert.equal(res.status, 200);
  return Buffer.from(await res.arrayBuffer());
}

async function downloadedBytes(d: Download): Promise<Buffer> {
  return readFile((await d.path())!);
}

function unzip(buffer: Buffer): Promise<Map<string, Buffer>> {
  return new Promise((resolve, reject) => {
    yauzl.fromBuffer(buffer, { lazyEntries: true, validateEntrySizes: true }, (err, zip) => {
      if (err) return reject(err);
      const files = new Map<string, Buffer>();
      zip.on('entry', (entry: yauzl.Entry) => {
        zip.openReadStream(entry, (e, stream) => {
          if (e) return reject(e);
          const chunks: Buffer[] = [];
          stream.on('data', (c: Buffer) => chunks.push(c));
          stream.on('end', () => {
            files.set(entry.fileName, Buffer.concat(chunks));
            zip.readEntry();
          });
        });
      });
      zip.on('end', () => resolve(files));
      zip.on('error', reject);
      zip.readEntry();
    });
  });
}

// The page's CSP forbids eval, so in-page checks are functions; these are the few browser globals
// they use (the project's tsconfig has no DOM library).
interface PageElement {
  id: string;
  hidden: boolean;
  dataset: Record<string, string | undefined>;
  style: { getPropertyValue(name: string): string };
}
declare const document: { getElementById(id: string): PageElement | null; activeElement: PageElement | null; documentElement: { scrollWidth: number } };
declare const window: { innerWidth: number };
declare const localStorage: { getItem(key: string): string | null };
declare const DataTransfer: new () => { items: { add(file: File): void } };

const row = (name: string) => page.locator('li.job', { has: page.locator('.name', { hasText: name }) });

before(async () => {
  if (missing) return;
  mkdirSync(ARTIFACTS, { recursive: true });
  server = await startTestServer();
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  page = await browser.newPage({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  page.on('request', (r) => {
    const url = r.url();
    if (!url.startsWith(server.url) && !url.startsWith('data:') && !url.startsWith('blob:')) foreignRequests.push(url);
  });
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

test('the page is served without a key, with its own script and style under a strict CSP', { skip: missing }, async () => {
  const res = await fetch(`${server.url}/`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type')!, /^text\/html/);
  assert.match(res.headers.get('content-security-policy')!, /script-src 'self'/);
  const html = await res.text();
  assert.match(html, /src="\/ui\/app\.js"/);
  const js = await fetch(`${server.url}/ui/app.js`);
  assert.equal(js.status, 200);
  const again = await fetch(`${server.url}/ui/app.js`, { headers: { 'if-none-match': js.headers.get('etag')! } });
  assert.equal(again.status, 304);
});

test('UI: key, upload a JPG and a PNG with options, progress to Succeeded, compare, download one and all', { skip: missing, timeout: 90_000 }, async () => {
  await page.goto(server.url);
  await shot('01-start');

  // A wrong key gets the spec's 401 explained; the right one shows the account and its limits.
  await page.fill('#key-input', 'not-a-key');
  await page.click('#key-form button[type=submit]');
  await page.locator('#notice').filter({ hasText: 'API key was refused' }).waitFor();
  await shot('02-bad-key');
  await page.fill('#key-input', server.key);
  await page.click('#key-form button[type=submit]');
  await page.locator('#account').filter({ hasText: 'credits' }).waitFor();
  assert.match(await page.locator('#limits').innerText(), /Up to 200 files/);
  assert.equal(await page.evaluate(() => localStorage.getItem('compressd.apiKey')), server.key);

  await page.setInputFiles('#file-input', [JPG, PNG]);
  await row('jpeg420exif.jpg').waitFor();
  await row('baiona_alpha.png').waitFor();

  // Options come from the format schemas: resize for both, PNG compression for the PNG only.
  const resize = page.locator('#options [data-option=resize]');
  const compression = page.locator('#options [data-option=compression]');
  await resize.waitFor();
  await compression.waitFor();
  assert.match(await resize.locator('legend').first().innerText(), /Resize · JPG, PNG/);
  assert.match(await compression.locator('legend').first().innerText(), /^PNG compression · PNG$/);
  await resize.locator('select').selectOption('1080p');
  assert.equal(await compression.locator('input[type=radio][value=lossy]').isChecked(), true);
  await shot('03-ready');

  await page.click('#start');
  for (const name of ['jpeg420exif.jpg', 'baiona_alpha.png']) {
    await page.waitForSelector(`li.job[data-stage=Succeeded] .name:text-is("${name}")`, { timeout: 60_000 });
  }
  await shot('04-succeeded');
  const jpgRow = row('jpeg420exif.jpg');
  const pngRow = row('baiona_alpha.png');
  assert.match(await jpgRow.locator('.meta').innerText(), /→ .* smaller/);
  const jpgJob = (await jpgRow.getAttribute('data-job-id'))!;
  const pngJob = (await pngRow.getAttribute('data-job-id'))!;

  // The compare dialog opens from the keyboard; the split moves with the arrow keys.
  await jpgRow.locator('button[data-action=compare]').focus();
  await page.keyboard.press('Enter');
  await page.locator('#compare[open]').waitFor();
  await page.waitForFunction(() => !document.getElementById('compare-figure')!.hidden || document.getElementById('compare-status')!.dataset.code);
  const compareCode = await page.locator('#compare-status').getAttribute('data-code');
  if (compareCode === null) {
    const facts = await page.locator('#compare-facts').innerText();
    assert.match(facts, /1920 × 1440 px \(resized\)/);
    assert.match(facts, /smaller/);
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'compare-split');
    for (let i = 0; i < 20; i++) await page.keyboard.press('ArrowRight');
    assert.equal(await page.evaluate(() => document.getElementById('compare-frame')!.style.getPropertyValue('--split')), '70%');
    const box = (await page.locator('#compare-frame').boundingBox())!;
    await page.mouse.move(box.x + box.width * 0.7, box.y + box.height / 2);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * 0.25, box.y + box.height / 2, { steps: 5 });
    await page.mouse.up();
    const dragged = await page.locator('#compare-split').inputValue();
    assert.ok(Number(dragged) < 35, `dragging moved the split to ${dragged}%`);
  } else {
    // Without a compare endpoint (or on its errors) the dialog explains the code instead of breaking.
    assert.ok((await page.locator('#compare-status').innerText()).length > 10);
  }
  await page.screenshot({ path: join(ARTIFACTS, 'ui-05-compare.png') });
  await page.keyboard.press('Escape');
  await page.locator('#compare[open]').waitFor({ state: 'detached' });

  // Each download is byte-identical to the API's; the resize option reached the server.
  const [single] = await Promise.all([page.waitForEvent('download'), jpgRow.locator('button[data-action=download]').click()]);
  assert.equal(single.suggestedFilename(), 'jpeg420exif.jpg');
  const jpgBytes = await downloadedBytes(single);
  assert.deepEqual(jpgBytes, await apiBytes(jpgJob));
  const meta = await sharp(jpgBytes).metadata();
  assert.equal(Math.max(meta.width!, meta.height!), 1920);

  const [all] = await Promise.all([page.waitForEvent('download'), page.click('#zip')]);
  assert.match(all.suggestedFilename(), /^compressd-\d{8}-\d{4}\.zip$/);
  const files = await unzip(await downloadedBytes(all));
  assert.deepEqual([...files.keys()].sort(), ['baiona_alpha.png', 'jpeg420exif.jpg']);
  assert.deepEqual(files.get('jpeg420exif.jpg'), jpgBytes);
  assert.deepEqual(files.get('baiona_alpha.png'), await apiBytes(pngJob));
  await shot('06-downloaded');

  // Errors are explained where they happen: a job deleted behind the page's back.
  assert.equal((await server.api(`/compress/job/${pngJob}`, { method: 'DELETE' })).status, 200);
  await pngRow.locator('button[data-action=download]').click();
  await pngRow.locator('.message').filter({ hasText: 'no longer exists on the server' }).waitFor();
  await pngRow.locator('button[data-action=compare]').click();
  await page.locator('#compare-status[data-code="jobs.not_found"]').filter({ hasText: 'no longer exists' }).waitFor();
  await page.screenshot({ path: join(ARTIFACTS, 'ui-06b-error.png') });
  await page.click('#compare-close');

  // Phone width: nothing overflows sideways.
  await page.setViewportSize({ width: 390, height: 844 });
  await shot('07-phone');
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), 'no horizontal scrolling at 390 px');

  assert.deepEqual(pageErrors, []);
  assert.deepEqual(foreignRequests, [], 'the page loads nothing from other origins');
});

test('UI: a stored key is reused after a reload; dropped unsupported and empty files are refused before upload', { skip: missing }, async () => {
  await page.setViewportSize({ width: 1280, height: 900 });
  await page.reload();
  await page.locator('#account').filter({ hasText: 'credits' }).waitFor();
  // Files dropped on the page (a DataTransfer as the browser builds one for a drag from the desktop).
  const dropped = await page.evaluateHandle(() => {
    const dt = new DataTransfer();
    dt.items.add(new File(['hello'], 'notes.txt', { type: 'text/plain' }));
    dt.items.add(new File([], 'empty.png', { type: 'image/png' }));
    return dt;
  });
  await page.dispatchEvent('#drop', 'drop', { dataTransfer: dropped });
  await page.waitForSelector('li.job[data-stage=rejected] .name:text-is("notes.txt")');
  assert.match(await row('notes.txt').locator('.message').innerText(), /not supported\. Supported: .*jpg/);
  assert.match(await row('empty.png').locator('.message').innerText(), /empty/);
  await shot('08-refused');
  assert.deepEqual(pageErrors, []);
});
