// The web page (issue 32) in headless Chromium, as a person uses it at desktop and phone width:
// layout assertions (the Compress button and the newest message inside the viewport), axe-core in
// every state, plain-language errors, compare with zoom, pages and perceived quality, restore after a reload.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser, type BrowserContext, type Download, type Page } from 'playwright-core';
import sharp from 'sharp';
import { jpegHasLocation } from '../ui/src/exif.ts';
import { CORPUS, json, startTestServer, type TestServer } from './helpers/server.ts';
import { unzip } from './helpers/zip.ts';

const CHROMIUM = '/usr/bin/chromium';
const ARTIFACTS = new URL('./artifacts/', import.meta.url).pathname;
/** `UPDATE_DOCS_SCREENSHOTS=1` also writes the README's screenshots (palette PNGs) to docs/screenshots/. */
const DOCS_SHOTS = process.env.UPDATE_DOCS_SCREENSHOTS === '1' ? new URL('../docs/screenshots/', import.meta.url).pathname : null;
const AXE = await readFile(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };

const file = (p: string) => join(CORPUS, p);
const PHOTO = file('jpg/jpeg420exif.jpg'); // 2048×1536, no GPS
const GPS_PHOTO = file('jpg/phone-IMG_20180725_163423.jpg'); // EXIF with GPS coordinates
const PNG = file('png/baiona_alpha.png');
const HEIC = file('heic/iphone_13_pro_max.heic');
const PDF = file('pdf/ocrmypdf-cardinal-scan.pdf'); // 4 Letter pages
const DOCX = file('docx/python-docx-inline-shapes.docx');
const missing = existsSync(CHROMIUM) ? false : `${CHROMIUM} is not installed (Debian package "chromium"; scripts/setup.mjs installs it)`;

let server: TestServer;
let browser: Browser;
let context: BrowserContext;
let page: Page;
const pageErrors: string[] = [];
const foreignRequests: string[] = [];

// The page's CSP forbids eval, so in-page checks are functions; these are the few browser globals
// they use (the project's tsconfig has no DOM library).
interface PageElement {
  id: string;
  hidden: boolean;
  dataset: Record<string, string | undefined>;
  naturalWidth: number;
  style: { transform: string };
  getBoundingClientRect(): { top: number; bottom: number; left: number; right: number };
}
declare const document: {
  getElementById(id: string): PageElement | null;
  querySelectorAll(s: string): PageElement[];
  getAnimations(): unknown[];
  activeElement: PageElement | null;
  documentElement: { scrollWidth: number };
};
declare const window: { innerWidth: number; innerHeight: number; axe: { run(context: unknown, options: unknown): Promise<AxeResults> } };
declare const localStorage: { getItem(key: string): string | null };
declare const DataTransfer: new () => { items: { add(file: File): void } };
interface AxeResults {
  violations: { id: string; impact: string; help: string; nodes: { target: string[] }[] }[];
}

const row = (name: string) => page.locator('li.job', { has: page.locator('.name', { hasText: name }) });

async function shot(name: string, docs = false): Promise<void> {
  const path = join(ARTIFACTS, `ui-${name}.png`);
  await page.screenshot({ path });
  if (docs && DOCS_SHOTS) {
    mkdirSync(DOCS_SHOTS, { recursive: true });
    await writeFile(join(DOCS_SHOTS, `${name}.png`), await sharp(path).resize({ width: 960, withoutEnlargement: true }).png({ palette: true, colours: 96, effort: 10 }).toBuffer());
  }
}

/** axe-core (WCAG 2.x A/AA and best practices) on the page as it is now: no violations. */
async function axe(state: string): Promise<void> {
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(AXE);
  const results = await page.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }));
  const found = results.violations.map((v) => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
  assert.deepEqual(found, [], `axe-core in state "${state}"`);
}

/** The element is shown entirely inside the viewport (no scrolling needed to see it). */
async function assertInView(selector: string, what: string): Promise<void> {
  const box = await page.locator(selector).boundingBox();
  assert.ok(box, `${what} is shown`);
  const vp = page.viewportSize()!;
  assert.ok(box.y >= 0 && box.y + box.height <= vp.height && box.x >= 0 && box.x + box.width <= vp.width, `${what} is inside the ${vp.width}×${vp.height} viewport (${JSON.stringify(box)})`);
}

async function apiBytes(jobId: string): Promise<Buffer> {
  const res = await server.api(`/compress/job/${jobId}/download`);
  assert.equal(res.status, 200);
  return Buffer.from(await res.arrayBuffer());
}

const downloadedBytes = async (d: Download): Promise<Buffer> => readFile((await d.path())!);

async function useKey(key: string): Promise<void> {
  await page.fill('#key-input', key);
  await page.click('#key-form button[type=submit]');
}

async function waitForStage(name: string, stage: string, timeout = 90_000): Promise<void> {
  await page.waitForSelector(`li.job[data-stage=${stage}] .name:text-is("${name}")`, { timeout });
}

before(async () => {
  if (missing) return;
  mkdirSync(ARTIFACTS, { recursive: true });
  server = await startTestServer({ workers: '2' });
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  context = await browser.newContext({ viewport: DESKTOP, acceptDownloads: true, reducedMotion: 'reduce' });
  page = await context.newPage();
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

it('the page is served without a key, with its own script and style under a strict CSP', { skip: missing }, async () => {
  const res = await fetch(`${server.url}/`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type')!, /^text\/html/);
  assert.match(res.headers.get('content-security-policy')!, /script-src 'self'/);
  assert.match(await res.text(), /src="\/ui\/app\.js"/);
  const js = await fetch(`${server.url}/ui/app.js`);
  assert.equal(js.status, 200);
  const again = await fetch(`${server.url}/ui/app.js`, { headers: { 'if-none-match': js.headers.get('etag')! } });
  assert.equal(again.status, 304);
});

describe('the page as a person uses it', { skip: missing }, () => {
  const batch = [PHOTO, GPS_PHOTO, PNG, HEIC, PDF, DOCX];
  const names = batch.map((p) => p.split('/').pop()!);
  const jobIds = new Map<string, string>();

  /** The compare facts show the job's perceived quality, next to the sizes, exactly when its status has one; returns it. */
  async function assertQualityFact(name: string): Promise<number | null> {
    const quality = (await json(await server.api(`/compress/job/${jobIds.get(name)}`))).metrics.perceivedQuality as number | null;
    const facts = await page.locator('#compare-facts').innerText();
    if (quality === null) assert.doesNotMatch(facts, /Perceived quality|SSIMULACRA2/, name);
    else assert.match(facts, new RegExp(`Saved[^]*Perceived quality[^\\n]*\\n+SSIMULACRA2 ${String(quality).replace('.', '\\.')} · hard to tell apart ≥ 90, high quality ≥ 70`), name);
    return quality;
  }

  it('before a key: one short format summary; Compress without a key says so next to the key field', async () => {
    await page.goto(server.url);
    assert.match(await page.locator('#drop .hint').innerText(), /^Photos, RAW camera files, PDF, Word, PowerPoint$/);
    assert.equal(await page.locator('#formats').isVisible(), false, 'no format list before the server said which');
    await page.setInputFiles('#file-input', [PHOTO]);
    await row('jpeg420exif.jpg').waitFor();
    await page.click('#start');
    await page.locator('#key-error').filter({ hasText: 'Paste your API key here first' }).waitFor();
    await assertInView('#key-error', 'the key error');
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'key-input');
    await axe('no key, a file chosen');
    await row('jpeg420exif.jpg').locator('button[data-action=remove]').click();
  });

  it('a refused key is explained next to the field; an accepted key folds to one line', async () => {
    await useKey('not-a-key');
    await page.locator('#key-error').filter({ hasText: 'This key was refused' }).waitFor();
    const field = (await page.locator('#key-input').boundingBox())!;
    const error = (await page.locator('#key-error').boundingBox())!;
    assert.ok(error.y > field.y && error.y - (field.y + field.height) < 60, 'the error sits right under the key field');
    await assertInView('#key-error', 'the key error');
    await shot('01-bad-key');
    await axe('refused key');

    assert.equal(await page.locator('#key-remember').isChecked(), false, '"Remember" is off until the person asks for it');
    await useKey(server.key);
    await page.locator('#account').filter({ hasText: /^Account default · \d+ credits$/ }).waitFor();
    assert.equal(await page.locator('#key-form').isVisible(), false);
    assert.equal(await page.locator('#key-change').innerText(), 'Change key');
    const card = (await page.locator('#key-card').boundingBox())!;
    assert.ok(card.height < 70, `the accepted key takes one line (${card.height} px)`);
    assert.equal(await page.evaluate(() => localStorage.getItem('compressd.apiKey')), null, 'not stored unless asked');
    // Asked for: the reloads below find it.
    await page.click('#key-change');
    await page.check('#key-remember');
    await useKey(server.key);
    await page.locator('#key-form').waitFor({ state: 'hidden' });
    assert.equal(await page.evaluate(() => localStorage.getItem('compressd.apiKey')), server.key);
    assert.match(await page.locator('#drop .hint').innerText(), /^Photos, RAW camera files, PDF, Word, PowerPoint · up to 200 files, each up to \d+ (MB|GB)$/);
    await page.locator('#formats summary').click();
    assert.match(await page.locator('#formats-list').innerText(), /HEIC.*JPG.*PDF/);
    await axe('key accepted, full format list open');
    await page.locator('#formats summary').click();
  });

  for (const [label, viewport] of [['desktop', DESKTOP], ['phone', PHONE]] as const) {
    it(`${label} ${viewport.width}×${viewport.height}: chosen files, the estimate and the Compress button are in view; options fold away`, async () => {
      await page.setViewportSize(viewport);
      await page.setInputFiles('#file-input', batch);
      for (const name of names) await row(name).waitFor();
      await page.locator('#options-panel').waitFor();
      assert.equal(await page.locator('#options-panel').getAttribute('open'), null, 'options start folded');
      assert.match(await page.locator('#options-panel summary').innerText(), /Options · Resize/);
      await assertInView('#start', 'the Compress button');
      await assertInView('#summary', 'the batch line');
      const card = (await page.locator('#key-card').boundingBox())!;
      assert.ok(card.height < 70, `the accepted key takes one line (${card.height} px)`);
      // The estimate is the API's: the sum of GET /compress/estimate/{format} for each file.
      let credits = 0;
      for (const p of batch) {
        const size = (await readFile(p)).length;
        credits += (await json(await server.api(`/compress/estimate/${p.split('.').pop()}?fileSizeBytes=${size}`))).estimatedCredits;
      }
      await page.locator('#estimate').filter({ hasText: `about ${credits} credits of your` }).waitFor();
      assert.match(await page.locator('#summary').innerText(), /^Ready: 6 files, [\d.]+ MB · about \d+ credits of your \d+$/);
      assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), 'no sideways scrolling');
      await shot(`02-ready-${label}`);
      await axe(`ready at ${label} width`);
      if (label === 'desktop') for (const name of names) await row(name).locator('button[data-action=remove]').click();
    });
  }

  it('options open on demand and the choice is remembered', async () => {
    await page.locator('#options-panel summary').click();
    await page.locator('#options [data-option=resize]').waitFor();
    await page.waitForFunction(() => localStorage.getItem('compressd.optionsOpen') === 'true');
    await axe('options open');
    await page.locator('#options-panel summary').click();
    await page.waitForFunction(() => localStorage.getItem('compressd.optionsOpen') === 'false');
  });

  it('Compress: focus moves to the progress line, waiting files say so without a moving bar, the total is summed', { timeout: 180_000 }, async () => {
    await page.click('#start');
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'summary', 'focus on the progress line, not lost on the page body');
    await assertInView('#summary', 'the progress line');
    // While the batch runs: no bar without a value (an indeterminate, moving bar) and none on a waiting file.
    const bad = new Set<string>();
    const watch = setInterval(() => {
      page
        .evaluate(() =>
          [...document.querySelectorAll('li.job')].flatMap((li) => {
            const bar = (li as unknown as { querySelector(s: string): (PageElement & { hasAttribute(a: string): boolean }) | null }).querySelector('progress')!;
            const stage = li.dataset.stage!;
            return !bar.hidden && (!bar.hasAttribute('value') || stage === 'Queued' || stage === 'pending') ? [stage] : [];
          }).concat(document.getAnimations().length ? ['an animation under reduced motion'] : []),
        )
        .then((found) => found.forEach((s) => bad.add(s)), () => undefined);
    }, 40);
    try {
      for (const name of names) await waitForStage(name, 'Succeeded', 150_000);
    } finally {
      clearInterval(watch);
    }
    assert.deepEqual([...bad], [], 'no moving bar on a waiting file, nothing animated under prefers-reduced-motion');
    for (const name of names) jobIds.set(name, (await row(name).getAttribute('data-job-id'))!);

    // The total is the jobs' metrics added up.
    let before = 0;
    let afterBytes = 0;
    for (const id of jobIds.values()) {
      const job = await json(await server.api(`/compress/job/${id}`));
      before += job.metrics.inputBytes;
      afterBytes += job.metrics.outputBytes;
    }
    const pct = ((1 - afterBytes / before) * 100).toFixed(1);
    assert.match(await page.locator('#summary').innerText(), new RegExp(`^Done: 6 files, .* → .* · ${pct.replace('.', '\\.')}% saved$`));
    await assertInView('#start', 'the Compress button');
    await assertInView('#summary', 'the newest message (the total)');

    assert.match(await row('iphone_13_pro_max.heic').locator('.meta').innerText(), /^HEIC → JPG · [\d.]+ MB → [\d.]+ (KB|MB) · [\d.]+% smaller$/);
    assert.match(await row('baiona_alpha.png').locator('.meta').innerText(), /^PNG · /);
    assert.match(await row('jpeg420exif.jpg').locator('.status').innerText(), /^Done$/);
    await shot('03-done-phone', true);
    await axe('batch done at phone width');
    await page.setViewportSize(DESKTOP);
    await assertInView('#start', 'the Compress button');
    await assertInView('#summary', 'the newest message (the total)');
    await shot('03-done-desktop', true);
    await axe('batch done at desktop width');
    await page.emulateMedia({ colorScheme: 'dark' });
    await shot('03-done-desktop-dark');
    await axe('batch done, dark mode');
    await page.emulateMedia({ colorScheme: 'light' });
  });

  it('a JPG that keeps GPS location says so; one without location does not', async () => {
    assert.equal(jpegHasLocation(await apiBytes(jobIds.get('phone-IMG_20180725_163423.jpg')!)), true, 'the output really keeps GPS');
    assert.equal(jpegHasLocation(await apiBytes(jobIds.get('jpeg420exif.jpg')!)), false);
    await row('phone-IMG_20180725_163423.jpg').locator('.location').filter({ hasText: 'location (GPS)' }).waitFor();
    assert.equal(await row('jpeg420exif.jpg').locator('.location').isVisible(), false);
    assert.equal(await row('iphone_13_pro_max.heic').locator('.location').isVisible(), false);
  });

  it('compare a photo: fit, 100% at full resolution, wheel and keyboard zoom, pan, split, download from the dialog', async () => {
    const photo = row('jpeg420exif.jpg');
    await photo.locator('button[data-action=compare]').focus();
    await page.keyboard.press('Enter');
    await page.locator('#compare-figure').waitFor();
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'compare-split');
    assert.match(await page.locator('#zoom-level').innerText(), /^Fit \(\d+%\)$/);
    assert.match(await page.locator('#compare-facts').innerText(), /2048 × 1536 px/);
    assert.doesNotMatch(await page.locator('#compare-facts').innerText(), /resized/);
    assert.notEqual(await assertQualityFact('jpeg420exif.jpg'), null, 'a JPG encoded lossily has a perceived quality');
    for (let i = 0; i < 20; i++) await page.keyboard.press('ArrowRight');
    assert.equal(await page.locator('#compare-split').inputValue(), '70');
    await axe('compare open');

    // 100% shows the picture's own pixels: the full-size previews are fetched and swapped in.
    await page.locator('#compare-frame').focus();
    await page.keyboard.press('1');
    await page.locator('#compare-note').filter({ hasText: /^Full resolution$/ }).waitFor();
    assert.equal(await page.locator('#zoom-level').innerText(), '100%');
    assert.equal(await page.evaluate(() => document.getElementById('compare-before')!.naturalWidth), 2048);
    const moved = await page.evaluate(() => document.getElementById('compare-before')!.style.transform);
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('ArrowDown');
    assert.notEqual(await page.evaluate(() => document.getElementById('compare-before')!.style.transform), moved, 'arrow keys pan');
    await page.keyboard.press('+');
    assert.equal(await page.locator('#zoom-level').innerText(), '150%');
    await page.keyboard.press('0');
    assert.match(await page.locator('#zoom-level').innerText(), /^Fit/);

    // The wheel zooms in around the pointer; dragging when zoomed pans.
    const box = (await page.locator('#compare-frame').boundingBox())!;
    const fitZoom = Number(await page.locator('#compare-frame').getAttribute('data-zoom'));
    await page.mouse.move(box.x + box.width * 0.3, box.y + box.height * 0.5);
    await page.mouse.wheel(0, -400);
    await page.waitForFunction((fit) => Number(document.getElementById('compare-frame')!.dataset.zoom) > fit * 1.5, fitZoom);
    const zoomed = await page.evaluate(() => document.getElementById('compare-before')!.style.transform);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * 0.1, box.y + box.height * 0.3, { steps: 4 });
    await page.mouse.up();
    assert.notEqual(await page.evaluate(() => document.getElementById('compare-before')!.style.transform), zoomed, 'dragging pans');
    await page.click('#zoom-fit');

    // When the whole picture is in view, dragging anywhere moves the split.
    await page.mouse.move(box.x + box.width * 0.7, box.y + box.height / 2);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * 0.25, box.y + box.height / 2, { steps: 5 });
    await page.mouse.up();
    assert.ok(Number(await page.locator('#compare-split').inputValue()) < 35);

    await assertInView('#compare-download', 'the download button in the dialog');
    await page.emulateMedia({ colorScheme: 'dark' });
    await axe('compare, dark mode');
    await page.emulateMedia({ colorScheme: 'light' });
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#compare-download')]);
    assert.deepEqual(await downloadedBytes(download), await apiBytes(jobIds.get('jpeg420exif.jpg')!));
    await shot('04-compare-desktop', true);
    await page.keyboard.press('Escape');
  });

  it('compare a PDF: the page in points, a page selector, a readable full-size page', async () => {
    await row('ocrmypdf-cardinal-scan.pdf').locator('button[data-action=compare]').click();
    await page.locator('#compare-figure').waitFor();
    assert.match(await page.locator('#compare-facts').innerText(), /page size 612 × 792 pt/);
    assert.doesNotMatch(await page.locator('#compare-facts').innerText(), /px/);
    await assertQualityFact('ocrmypdf-cardinal-scan.pdf');
    assert.equal(await page.locator('#compare-page-count').innerText(), 'of 4');
    const first = await page.evaluate(() => (document.getElementById('compare-before') as unknown as { src: string }).src);
    await page.selectOption('#compare-page', '3');
    await page.waitForFunction((src) => (document.getElementById('compare-before') as unknown as { src: string }).src !== src && !document.getElementById('compare-figure')!.hidden, first);
    assert.equal(await page.locator('#compare-page').inputValue(), '3');
    for (let i = 0; i < 3; i++) await page.click('#zoom-in');
    await page.locator('#compare-note').filter({ hasText: /^Full resolution$/ }).waitFor();
    assert.equal(await page.evaluate(() => document.getElementById('compare-before')!.naturalWidth), Math.round((3000 * 612) / 792));
    await axe('compare a PDF page');
    await page.keyboard.press('Escape');
  });

  it('compare a DOCX: the picture shown is named', async () => {
    await row('python-docx-inline-shapes.docx').locator('button[data-action=compare]').click();
    await page.locator('#compare-figure').waitFor();
    assert.match(await page.locator('#compare-subject').innerText(), /^The largest picture in the document: image\d+\.\w+$/);
    assert.doesNotMatch(await page.locator('#compare-facts').innerText(), /\(resized\)/);
    await assertQualityFact('python-docx-inline-shapes.docx');
    await page.keyboard.press('Escape');
  });

  it('phone: the compare dialog fits, pinch zooms', async () => {
    await page.setViewportSize(PHONE);
    await row('baiona_alpha.png').locator('button[data-action=compare]').click();
    await page.locator('#compare-figure').waitFor();
    await assertInView('#compare-close', 'Close');
    await assertInView('#compare-frame', 'the picture');
    await assertQualityFact('baiona_alpha.png');
    const box = (await page.locator('#compare-frame').boundingBox())!;
    const cx = box.width / 2;
    const cy = box.height / 2;
    const at = (id: number, dx: number, type: string) =>
      page.dispatchEvent('#compare-frame', type, { pointerId: id, isPrimary: id === 1, pointerType: 'touch', clientX: box.x + cx + dx, clientY: box.y + cy, bubbles: true });
    await at(1, -20, 'pointerdown');
    await at(2, 20, 'pointerdown');
    for (const d of [40, 60, 80]) await at(2, d, 'pointermove');
    await at(1, -20, 'pointerup');
    await at(2, 80, 'pointerup');
    assert.doesNotMatch(await page.locator('#zoom-level').innerText(), /^Fit/, 'a pinch zoomed in');
    await page.click('#zoom-fit');
    await shot('05-compare-phone', true);
    await axe('compare at phone width');
    await page.keyboard.press('Escape');
    await page.setViewportSize(DESKTOP);
  });

  it('download one and all: byte-identical to the API', async () => {
    const [single] = await Promise.all([page.waitForEvent('download'), row('iphone_13_pro_max.heic').locator('button[data-action=download]').click()]);
    assert.equal(single.suggestedFilename(), 'iphone_13_pro_max.jpg');
    assert.deepEqual(await downloadedBytes(single), await apiBytes(jobIds.get('iphone_13_pro_max.heic')!));
    const [all] = await Promise.all([page.waitForEvent('download'), page.click('#zip')]);
    const files = await unzip(await downloadedBytes(all));
    assert.equal(files.size, 6);
    assert.deepEqual(files.get('baiona_alpha.png'), await apiBytes(jobIds.get('baiona_alpha.png')!));
  });

  it('after a reload the list comes back from the jobs still on the server', async () => {
    await page.reload();
    for (const [name, id] of jobIds) {
      await waitForStage(name, 'Succeeded', 30_000);
      assert.equal(await row(name).getAttribute('data-job-id'), id);
    }
    assert.match(await page.locator('#summary').innerText(), /^Done: 6 files/);
    assert.equal(await row('baiona_alpha.png').locator('button[data-action=retry]').isVisible(), false);
    // A job deleted on the server meanwhile is dropped from the stored list at the next load.
    assert.equal((await server.api(`/compress/job/${jobIds.get('baiona_alpha.png')}`, { method: 'DELETE' })).status, 200);
    await page.reload();
    await waitForStage('jpeg420exif.jpg', 'Succeeded', 30_000);
    await page.waitForFunction(() => !(localStorage.getItem('compressd.jobs') ?? '').includes('baiona'));
    assert.equal(await row('baiona_alpha.png').count(), 0);
    await axe('restored after reload');
  });

  it('damaged and unsupported files: plain words from the message table, Retry only where it can help', { timeout: 60_000 }, async () => {
    await page.click('#clear');
    await page.setInputFiles('#file-input', [file('bad/truncated.jpg'), file('bad/actually-pdf.jpg')]);
    const dropped = await page.evaluateHandle(() => {
      const dt = new DataTransfer();
      dt.items.add(new File(['hello'], 'notes.txt', { type: 'text/plain' }));
      dt.items.add(new File([], 'empty.png', { type: 'image/png' }));
      return dt;
    });
    await page.dispatchEvent('#drop', 'drop', { dataTransfer: dropped });
    await waitForStage('notes.txt', 'rejected');
    assert.equal(await row('notes.txt').locator('.message:not(.location)').innerText(), 'This type of file is not supported. The supported formats are listed under the drop zone.');
    assert.match(await row('empty.png').locator('.message:not(.location)').innerText(), /empty/);
    await page.click('#start');
    await waitForStage('truncated.jpg', 'Failed');
    await waitForStage('actually-pdf.jpg', 'Failed');
    for (const name of ['truncated.jpg', 'actually-pdf.jpg', 'notes.txt']) {
      const text = await row(name).locator('.message:not(.location)').innerText();
      assert.doesNotMatch(text, /vips|libpng|premature|bytes to|\bMB\b.*\bGB\b/i, `${name}: ${text}`);
      assert.equal(await row(name).locator('button[data-action=retry]').isVisible(), false, `no Retry for ${name}`);
    }
    assert.match(await row('truncated.jpg').locator('.message:not(.location)').innerText(), /cut short|damaged/);
    assert.match(await row('actually-pdf.jpg').locator('.message:not(.location)').innerText(), /does not match its name|not a valid JPG|could not be read/);
    await assertInView('#start', 'the Compress button');
    assert.equal(await page.locator('#summary').innerText(), '4 not compressed (see below)');
    await assertInView('#summary', 'the newest message');
    await shot('07-errors-desktop');
    await axe('errors');
    assert.deepEqual(pageErrors, []);
    assert.deepEqual(foreignRequests, [], 'the page loads nothing from other origins');
  });
});
