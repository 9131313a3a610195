// The web page's last stumbles (issue 42) in headless Chromium, with layout assertions: the action
// bar's share of a 400 % zoomed screen, no row growing or shrinking during a batch, the page
// following the browser's default font size; and the behaviours: a warning before leaving unsent
// files and a notice after, one conversion label from the catalog's rule, the first visit's
// explanation, redo with other options, Enter on "Choose files…", what the credit estimate depends on.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { CORPUS, json, startTestServer, type TestServer } from './helpers/server.ts';

const CHROMIUM = '/usr/bin/chromium';
const AXE = await readFile(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const PHOTO = join(CORPUS, 'jpg/jpeg420exif.jpg'); // 2048×1536, no GPS
const PNG = join(CORPUS, 'png/density_plot.png');
const HEIC = join(CORPUS, 'heic/iphone_13_pro_max.heic');
const missing = existsSync(CHROMIUM) ? false : `${CHROMIUM} is not installed (Debian package "chromium"; scripts/setup.mjs installs it)`;

// The page's CSP forbids eval, so in-page checks are functions over these few browser globals.
interface Box {
  top: number;
  bottom: number;
  height: number;
}
interface PageElement {
  dataset: Record<string, string | undefined>;
  textContent: string | null;
  getBoundingClientRect(): Box;
  querySelector(s: string): PageElement | null;
  scrollIntoView(o: unknown): void;
}
declare const document: { getElementById(id: string): PageElement | null; querySelectorAll(s: string): PageElement[]; documentElement: PageElement & { scrollWidth: number } };
declare const window: {
  innerWidth: number;
  innerHeight: number;
  dispatchEvent(e: unknown): boolean;
  getComputedStyle(e: unknown): { fontSize: string };
  axe: { run(context: unknown, options: unknown): Promise<{ violations: { id: string; nodes: { target: string[] }[] }[] }> };
};
declare const Event: new (type: string, init: { cancelable: boolean }) => { defaultPrevented: boolean };

let server: TestServer;
let browser: Browser;
const contexts: BrowserContext[] = [];

before(async () => {
  if (missing) return;
  server = await startTestServer({ workers: '2' });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run'] });
});
after(async () => {
  await browser?.close();
  await server?.stop();
});

/** A fresh browser profile at this viewport (no stored key), on the page. */
async function open(viewport = { width: 1280, height: 800 }, setup?: (page: Page) => Promise<void>): Promise<Page> {
  const context = await browser.newContext({ viewport, reducedMotion: 'reduce' });
  contexts.push(context);
  const page = await context.newPage();
  await setup?.(page);
  await page.goto(server.url);
  return page;
}

async function useKey(page: Page): Promise<void> {
  await page.fill('#key-input', server.key);
  await page.click('#key-form button[type=submit]');
  await page.locator('#account').filter({ hasText: /credits$/ }).waitFor();
}

/** `count` copies of a corpus file under distinct names. */
async function copies(path: string, count: number, stem: string) {
  const buffer = await readFile(path);
  const ext = path.split('.').pop()!;
  return Array.from({ length: count }, (_, i) => ({ name: `${stem}-${i + 1}.${ext}`, mimeType: 'application/octet-stream', buffer }));
}

async function axe(page: Page, state: string): Promise<void> {
  await page.evaluate(AXE);
  const results = await page.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }));
  assert.deepEqual(results.violations.map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`), [], `axe-core in state "${state}"`);
}

const row = (page: Page, name: string) => page.locator('li.job', { has: page.locator('.name', { hasText: name }) });

describe('the page at the edges', { skip: missing }, () => {
  it('the first visit says what the service is and where a key comes from', async () => {
    const page = await open();
    const intro = await page.locator('#key-form .intro').allInnerTexts();
    assert.match(intro.join(' '), /makes photos, PDFs and Word and PowerPoint files smaller/);
    assert.match(intro.join(' '), /API key\. The server prints one when it first starts.*compressd keys create/);
    await axe(page, 'first visit');
  });

  it('Enter on "Choose files…" opens the file picker (several files)', async () => {
    const page = await open();
    await page.focus('#choose');
    // Waiting for a chooser turns on the browser's interception of it, one command away: a round trip
    // to the page after it makes sure the picker Enter opens is intercepted (else it opened, unseen).
    const picked = page.waitForEvent('filechooser', { timeout: 5000 });
    await page.evaluate(() => 0);
    await page.keyboard.press('Enter');
    const chooser = await picked;
    assert.equal(chooser.isMultiple(), true);
    await chooser.setFiles(await copies(PHOTO, 1, 'picked'));
    await row(page, 'picked-1.jpg').waitFor();
  });

  it("follows the browser's default font size (set to 32 px): text and controls grow with it", async () => {
    const measure = (page: Page) =>
      page.evaluate(() => ['key-input', 'choose', 'files-title'].map((id) => window.getComputedStyle(document.getElementById(id)).fontSize));
    const plain = await measure(await open());
    const large = await measure(
      await open(undefined, async (page) => {
        const cdp = await page.context().newCDPSession(page);
        await cdp.send('Page.setFontSizes', { fontSizes: { standard: 32 } });
      }),
    );
    assert.deepEqual(plain.map(parseFloat), [16, 16, 17.6]);
    assert.deepEqual(large.map(parseFloat), [32, 32, 35.2], `at a 32 px default: ${large.join(', ')}`);
  });

  it('400 % zoom (320 × 256 CSS px): the action bar covers at most a quarter of the screen while reading the list, and is reached at its end', async (t) => {
    const page = await open({ width: 320, height: 256 });
    await useKey(page);
    await page.setInputFiles('#file-input', await copies(PHOTO, 8, 'zoomed'));
    await row(page, 'zoomed-8.jpg').waitFor();
    const covered = await page.evaluate(() => {
      document.querySelectorAll('li.job')[1]!.scrollIntoView({ block: 'start' });
      const bar = document.getElementById('action-bar')!.getBoundingClientRect();
      return Math.max(0, Math.min(bar.bottom, window.innerHeight) - Math.max(bar.top, 0)) / window.innerHeight;
    });
    t.diagnostic(`at 400 %: the action bar covers ${(covered * 100).toFixed(0)} % of the screen over the list`);
    assert.ok(covered <= 0.25, `the bar covers ${(covered * 100).toFixed(0)} % of the screen`);
    await page.locator('#start').scrollIntoViewIfNeeded();
    const start = (await page.locator('#start').boundingBox())!;
    assert.ok(start.y >= 0 && start.y + start.height <= 256, 'Compress is reached by scrolling');
    assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), 'no sideways scrolling');
    await axe(page, '400 % zoom');
  });

  it('a batch: no row changes height; HEIC says "JPG or PNG" until done, then what it became; the estimate says options do not change it; redo with other options', { timeout: 240_000 }, async (t) => {
    const page = await open();
    await useKey(page);
    await page.setInputFiles('#file-input', [PHOTO, PNG, HEIC]);
    await page.locator('#estimate').filter({ hasText: /about \d+ credits? of your \d+ \(by file size; the options do not change it\)$/ }).waitFor();
    await page.click('#start');
    const heights = new Map<string, Set<number>>();
    const heicLabels = new Set<string>();
    for (;;) {
      const rows = await page.evaluate(() =>
        [...document.querySelectorAll('li.job')].map((li) => ({ name: li.querySelector('.name')!.textContent!, stage: li.dataset.stage!, height: li.getBoundingClientRect().height, meta: li.querySelector('.meta')!.textContent! })),
      );
      for (const r of rows) {
        (heights.get(r.name) ?? heights.set(r.name, new Set()).get(r.name)!).add(Math.round(r.height * 10) / 10);
        if (r.name.endsWith('.heic')) heicLabels.add(r.meta.split(' · ')[0]!);
      }
      if (rows.every((r) => ['Succeeded', 'Failed'].includes(r.stage))) break;
      await page.waitForTimeout(25);
    }
    t.diagnostic(`row heights during the batch: ${[...heights].map(([n, h]) => `${n} ${[...h].join('/')} px`).join(', ')}`);
    for (const [name, seen] of heights) assert.equal(seen.size, 1, `${name} changed height during the batch: ${[...seen].join(', ')} px`);
    assert.deepEqual([...heicLabels].filter((l) => l !== 'HEIC' && l !== 'HEIC → JPG or PNG'), ['HEIC → JPG'], `HEIC labels: ${[...heicLabels].join(' | ')}`);

    const first = await row(page, 'jpeg420exif.jpg').getAttribute('data-job-id');
    await row(page, 'jpeg420exif.jpg').locator('button[data-action=redo]').click();
    assert.equal(await page.locator('#options-panel').getAttribute('open'), '');
    await page.locator('#notice').filter({ hasText: 'jpeg420exif.jpg was added again: choose other options, then Compress.' }).waitFor();
    await page.selectOption('#options [data-option=resize] select', '720p');
    await page.click('#start');
    const again = page.locator('li.job[data-stage=Succeeded]', { has: page.locator('.name', { hasText: 'jpeg420exif.jpg' }) });
    await again.nth(1).waitFor({ timeout: 90_000 });
    const ids = await again.evaluateAll((els) => els.map((e) => (e as unknown as PageElement).dataset.jobId));
    assert.equal(ids.length, 2);
    assert.equal(ids[0], first, 'the first result stays to compare with');
    const [a, b] = await Promise.all(ids.map(async (id) => (await json(await server.api(`/compress/job/${id}`))).metrics.outputBytes as number));
    assert.ok(b! < a!, `the redo at 720p is smaller (${b} < ${a} bytes)`);
    await axe(page, 'after a redo');
  });

  it('leaving with files not yet uploaded asks first; after a reload the page says which files were lost', async () => {
    // The uploads never get an answer: every file is still the page's when it reloads.
    const page = await open(undefined, async (p) => {
      await p.route('**/compress', (route) => (route.request().method() === 'POST' ? undefined : route.continue()));
    });
    await useKey(page);
    const files = await copies(PHOTO, 4, 'unsent');
    const asks = () => page.evaluate(() => {
      const e = new Event('beforeunload', { cancelable: true });
      window.dispatchEvent(e);
      return e.defaultPrevented;
    });
    assert.equal(await asks(), false, 'nothing to lose yet');
    await page.setInputFiles('#file-input', files);
    await page.click('#start');
    await page.locator('li.job[data-stage=uploading]').first().waitFor();
    assert.equal(await asks(), true, 'leaving now would drop the files: the page asks');
    page.once('dialog', (d) => void d.accept());
    await page.reload();
    await page.locator('#notice').filter({ hasText: '4 files were not uploaded when the page was left, so the server never got them: unsent-1.jpg, unsent-2.jpg, unsent-3.jpg, unsent-4.jpg. Choose them again to compress them.' }).waitFor();
    await page.reload();
    assert.equal(await page.locator('#notice').isVisible(), false, 'said once');
  });
});
