import { Api, ApiProblem, type Entitlements, type Listing } from './api.ts';
import { Batch, TERMINAL, type Item, type SavedJob, type Stage } from './batch.ts';
import { CompareDialog } from './compare.ts';
import { byId, h, saveBlob } from './dom.ts';
import { jpegHasLocation } from './exif.ts';
import { extensionOf, fileNameFromDisposition, formatBytes, percentSaved, savingsText } from './format.ts';
import { JobRow, type RowAction } from './job-row.ts';
import { messageFor } from './messages.ts';
import { OptionsForm } from './options-form.ts';
import { uniqueNames, zip } from './zip.ts';

const KEY_STORAGE = 'compressd.apiKey';
/** Jobs this browser sent, so the list comes back after a reload while the server still has them. */
const JOBS_STORAGE = 'compressd.jobs';
/** The names of the files a page left behind unsent, for the next load to say so. */
const UNSENT_STORAGE = 'compressd.unsent';
/** Chosen files the server has not got yet: leaving the page drops them (a File cannot be stored). */
const UNSENT = new Set<Stage>(['ready', 'pending', 'uploading', 'waiting']);
/** EXIF (APP1) is at most 64 KB and comes before the picture data. */
const EXIF_HEAD_BYTES = 128 * 1024;

const api = new Api();
const keyForm = byId<HTMLFormElement>('key-form');
const keyInput = byId<HTMLInputElement>('key-input');
const keyRemember = byId<HTMLInputElement>('key-remember');
const keyError = byId('key-error');
const keyDone = byId('key-done');
const account = byId('account');
const drop = byId('drop');
const fileInput = byId<HTMLInputElement>('file-input');
const chooseButton = byId<HTMLButtonElement>('choose');
const limitsText = byId('limits');
const startButton = byId<HTMLButtonElement>('start');
const zipButton = byId<HTMLButtonElement>('zip');
const clearButton = byId<HTMLButtonElement>('clear');
const notice = byId('notice');
const summary = byId('summary');
const list = byId<HTMLUListElement>('jobs');
const live = byId('live');

const options = new OptionsForm(api, byId<HTMLDetailsElement>('options-panel'), byId<HTMLFormElement>('options'), byId('options-fields'), byId('options-title'), byId('options-summary'));
const compare = new CompareDialog(api);
const rows = new Map<number, JobRow>();
let keyAccepted = false;
let balance: number | null = null;
let listing: Listing | null = null;
/** The catalog's output rule, as the listing's format graph gives it. */
const outputsOf = (format: string, jobType: string) => (listing?.sourceFormatTo[format] ?? []).filter((e) => e.job === jobType).map((e) => e.targetFormat);

/** A message about the batch, in the bar that stays in view with the Compress button. */
function say(text: string, kind: 'error' | 'info' = 'error'): void {
  notice.textContent = text;
  notice.hidden = !text;
  notice.classList.toggle('info', kind === 'info');
}

/** A message about the key, next to the key field (which is opened to show it). */
function keyProblem(text: string): void {
  showKeyForm();
  keyError.textContent = text;
  keyError.hidden = !text;
  if (text) keyInput.focus();
}

const announce = (text: string) => {
  live.textContent = text;
};

const asProblem = (e: unknown) => (e instanceof ApiProblem ? e : new ApiProblem('network', 0, e instanceof Error ? e.message : null));

function refreshButtons(): void {
  const items = batch.items;
  startButton.disabled = !items.some((i) => i.stage === 'ready');
  const done = batch.succeeded().length;
  zipButton.disabled = done === 0;
  zipButton.textContent = done > 0 ? `Download all (${done}, .zip)` : 'Download all (.zip)';
  clearButton.disabled = !items.some((i) => TERMINAL.has(i.stage) || i.stage === 'rejected');
}

let estimateRun = 0;
const estimates = new Map<string, Promise<number | null>>();
/** Credits for one file by the API's estimate; null when the server cannot say. */
function estimateOf(item: Item): Promise<number | null> {
  const key = `${item.format}:${item.size}`;
  let e = estimates.get(key);
  if (!e) {
    e = api.estimate(item.format, item.size).then((r) => r.estimatedCredits, () => null);
    estimates.set(key, e);
  }
  return e;
}

/** The line above the buttons: what is about to be sent and what it costs, then what the batch saved. */
function refreshSummary(): void {
  const items = batch.items;
  const ready = items.filter((i) => i.stage === 'ready');
  const done = batch.succeeded();
  const working = items.filter((i) => !TERMINAL.has(i.stage) && i.stage !== 'ready' && i.stage !== 'rejected' && i.stage !== 'error').length;
  const parts: (string | Node)[] = [];
  const files = (n: number) => `${n} ${n === 1 ? 'file' : 'files'}`;
  if (done.length) {
    const before = done.reduce((n, i) => n + (i.job?.metrics.inputBytes ?? 0), 0);
    const after = done.reduce((n, i) => n + (i.job?.metrics.outputBytes ?? 0), 0);
    parts.push(`Done: ${files(done.length)}, ${formatBytes(before)} → ${formatBytes(after)} · `, h('span', { class: 'savings', text: percentSaved(before, after) }));
  }
  if (working) parts.push(`${parts.length ? ' · ' : ''}${working} in progress`);
  const failed = items.filter((i) => i.stage === 'Failed' || i.stage === 'rejected' || i.stage === 'error').length;
  if (failed) parts.push(`${parts.length ? ' · ' : ''}${failed} not compressed (see below)`);
  if (ready.length) {
    const bytes = ready.reduce((n, i) => n + i.size, 0);
    const cost = h('span', { id: 'estimate' });
    parts.push(`${parts.length ? ' · ' : ''}Ready: ${files(ready.length)}, ${formatBytes(bytes)}`, cost);
    if (keyAccepted) {
      const run = ++estimateRun;
      void Promise.all(ready.map(estimateOf)).then((credits) => {
        if (run !== estimateRun || credits.some((c) => c === null)) return;
        const total = (credits as number[]).reduce((a, b) => a + b, 0);
        // The cost follows the file sizes alone (the estimate takes no options).
        cost.textContent = ` · about ${total} ${total === 1 ? 'credit' : 'credits'}${balance === null ? '' : ` of your ${balance}`} (by file size; the options do not change it)`;
      });
    }
  }
  summary.replaceChildren(...parts);
}

let optionsPending = false;
/** The options panel follows the formats of the files about to be sent (or, once sent, of the list). */
function refreshOptions(): void {
  if (optionsPending) return;
  optionsPending = true;
  queueMicrotask(() => {
    optionsPending = false;
    const ready = batch.readyFormats();
    const formats = ready.length ? ready : [...new Set(batch.items.filter((i) => i.stage !== 'rejected').map((i) => i.format))].sort();
    for (const format of ready) {
      options.schemaFor(format).catch((e) => {
        const p = asProblem(e);
        if (p.status !== 400) return;
        for (const item of batch.items) if (item.stage === 'ready' && item.format === format) batch.reject(item, p);
      });
    }
    void options.render(formats, ready.length === 0);
  });
}

let savedIds = '';
/** Set once the jobs of an earlier visit were looked for: until then the stored list must not be overwritten. */
let restored = false;
/** Keeps the ids of the jobs on the list in the browser (only when they changed). */
function saveJobs(): void {
  if (!restored) return;
  const saved: SavedJob[] = batch.items.filter((i) => i.job).map((i) => ({ id: i.job!.id, name: i.name, size: i.size, format: i.format }));
  const ids = saved.map((s) => s.id).join(',');
  if (ids === savedIds) return;
  savedIds = ids;
  if (saved.length) localStorage.setItem(JOBS_STORAGE, JSON.stringify(saved));
  else localStorage.removeItem(JOBS_STORAGE);
}

function readSavedJobs(): SavedJob[] {
  try {
    const parsed: unknown = JSON.parse(localStorage.getItem(JOBS_STORAGE) ?? '[]');
    return Array.isArray(parsed) ? parsed.filter((s): s is SavedJob => typeof s?.id === 'string' && typeof s.name === 'string') : [];
  } catch {
    return [];
  }
}

/** Brings back the jobs of an earlier visit that the server still keeps (their outputs not yet deleted). */
async function restoreJobs(): Promise<void> {
  const saved = readSavedJobs().filter((s) => !batch.items.some((i) => i.job?.id === s.id));
  const found = await Promise.all(saved.map((s) => api.status(s.id).then((status) => ({ s, status }), () => null)));
  for (const f of found) {
    if (!f || (f.status.expiresAt && Date.parse(f.status.expiresAt) <= Date.now())) continue;
    batch.restore(f.s, f.status);
  }
  restored = true;
  saveJobs();
  refreshOptions();
}

const locationChecked = new WeakSet<Item>();
/** A JPG output keeps the camera's EXIF, GPS included: say so on the row, read from the output's first bytes. */
function checkLocation(item: Item): void {
  if (item.stage !== 'Succeeded' || !item.job || locationChecked.has(item)) return;
  locationChecked.add(item);
  if (!/^jpe?g$/.test(extensionOf(item.job.output.fileName))) return;
  api.outputHead(item.job.id, EXIF_HEAD_BYTES).then(
    (head) => {
      item.location = jpegHasLocation(head);
      rows.get(item.uid)?.update();
    },
    () => undefined,
  );
}

const batch: Batch = new Batch(api, {
  changed(item) {
    let row = rows.get(item.uid);
    if (!row) {
      row = new JobRow(item, act, outputsOf);
      rows.set(item.uid, row);
      list.append(row.el);
    }
    row.update();
    checkLocation(item);
    refreshButtons();
    refreshSummary();
    saveJobs();
  },
  removed(item) {
    rows.get(item.uid)?.el.remove();
    rows.delete(item.uid);
    refreshButtons();
    refreshSummary();
    refreshOptions();
    saveJobs();
  },
  keyRefused(p) {
    keyAccepted = false;
    keyProblem(messageFor(p));
  },
  finished(item) {
    const m = item.job?.metrics;
    announce(item.stage === 'Succeeded' && m ? `${item.name}: done, ${savingsText(m.inputBytes, m.outputBytes)}.` : `${item.name}: ${item.stage}. ${item.message ?? ''}`);
    scheduleBalance();
  },
});

function showKeyForm(): void {
  keyDone.hidden = true;
  keyForm.hidden = false;
}

/** The accepted key folds to one line: who, how many credits, and a way to change it. */
function showAccount(e: Entitlements): void {
  const who = e.account ? `Account ${e.account}${e.guest ? ' (guest)' : ''}` : 'Key accepted';
  balance = typeof e.balance === 'number' ? e.balance : null;
  account.textContent = balance === null ? who : `${who} · ${balance} credits`;
  keyError.hidden = true;
  keyForm.hidden = true;
  keyDone.hidden = false;
}

let balanceTimer: ReturnType<typeof setTimeout> | null = null;
function scheduleBalance(): void {
  if (balanceTimer) return;
  balanceTimer = setTimeout(() => {
    balanceTimer = null;
    api.entitlements().then((e) => {
      if (keyAccepted) showAccount(e);
    }, () => undefined);
  }, 500);
}

function applyLimits(l: Listing, e: Entitlements): void {
  listing = l;
  for (const row of rows.values()) row.update();
  const formats = new Set(l.compressors.flatMap((c) => c.inputFormats));
  batch.limits = {
    formats,
    maxFileSizeBytes: l.maxFileSizeBytes ?? null,
    maxBatchFiles: l.maxBatchFiles ?? null,
    maxInFlight: Math.max(1, e.limits?.maxQueuedJobs ?? 6),
  };
  fileInput.accept = [...formats].map((f) => `.${f}`).join(',');
  limitsText.textContent = ` · up to ${l.maxBatchFiles} files, each up to ${formatBytes(l.maxFileSizeBytes)}`;
  byId('formats-list').textContent = [...formats].sort().map((f) => f.toUpperCase()).join(', ');
  byId('formats').hidden = false;
}

/** Checks the key against the server and loads the caller's limits; true when accepted. */
async function useKey(key: string): Promise<boolean> {
  api.key = key.trim();
  keyError.hidden = true;
  try {
    const [e, listing] = await Promise.all([api.entitlements(), api.listing()]);
    keyAccepted = true;
    estimates.clear();
    showAccount(e);
    applyLimits(listing, e);
    batch.recheck();
    batch.resume();
    refreshOptions();
    refreshSummary();
    void restoreJobs();
    return true;
  } catch (err) {
    keyAccepted = false;
    keyProblem(messageFor(asProblem(err)));
    return false;
  }
}

keyForm.addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const key = keyInput.value.trim();
  if (!key) return;
  if (await useKey(key)) {
    if (keyRemember.checked) localStorage.setItem(KEY_STORAGE, key);
    else localStorage.removeItem(KEY_STORAGE);
    announce('API key accepted.');
    // The field folded away: the next thing to do is choosing files.
    chooseButton.focus();
  }
});

byId('key-change').addEventListener('click', () => {
  showKeyForm();
  keyInput.select();
  keyInput.focus();
});

byId('key-forget').addEventListener('click', () => {
  localStorage.removeItem(KEY_STORAGE);
  keyInput.value = '';
  api.key = '';
  keyAccepted = false;
  keyProblem('The key was removed from this browser.');
});

function addFiles(files: File[]): void {
  if (files.length === 0) return;
  const left = batch.add(files);
  if (left > 0) say(`At most ${batch.limits.maxBatchFiles} files fit in one batch; ${left} ${left === 1 ? 'file was' : 'files were'} not added. Clear finished files to make room.`);
  else if (!notice.classList.contains('info')) say('');
  refreshOptions();
}

// A button, not a label: Enter and Space open the picker, as on any button.
chooseButton.addEventListener('click', () => fileInput.click());

fileInput.addEventListener('change', () => {
  addFiles([...(fileInput.files ?? [])]);
  fileInput.value = '';
});

// Dropping anywhere adds the files; the browser would otherwise navigate away to show them.
for (const type of ['dragenter', 'dragover'] as const) {
  document.addEventListener(type, (e) => {
    if (!e.dataTransfer?.types.includes('Files')) return;
    e.preventDefault();
    e.dataTransfer.dropEffect = 'copy';
    drop.classList.add('over');
  });
}
document.addEventListener('dragleave', (e) => {
  if (e.relatedTarget === null) drop.classList.remove('over');
});
document.addEventListener('drop', (e) => {
  if (!e.dataTransfer?.types.includes('Files')) return;
  e.preventDefault();
  drop.classList.remove('over');
  addFiles([...e.dataTransfer.files]);
});

startButton.addEventListener('click', async () => {
  if (!keyAccepted) {
    keyProblem('Paste your API key here first.');
    return;
  }
  if (!options.check()) return;
  const formats = batch.readyFormats();
  const schemas = new Map<string, Awaited<ReturnType<typeof options.schemaFor>>>();
  for (const format of formats) {
    try {
      schemas.set(format, await options.schemaFor(format));
    } catch (e) {
      const p = asProblem(e);
      if (p.status !== 400) {
        say(messageFor(p));
        return;
      }
      for (const item of batch.items) if (item.stage === 'ready' && item.format === format) batch.reject(item, p);
    }
  }
  say('');
  batch.start((item) => options.optionsFor(schemas.get(item.format)!));
  refreshOptions();
  // The button just disabled itself; the progress line next to it is where to look (and read) next.
  summary.focus();
});

async function downloadOne(row: JobRow): Promise<void> {
  const { item } = row;
  row.busy('download', true);
  try {
    const res = await api.download(item.job!.id);
    const name = fileNameFromDisposition(res.headers.get('content-disposition')) ?? item.job!.output.fileName;
    saveBlob(await res.blob(), name);
  } catch (e) {
    item.message = messageFor(asProblem(e));
    item.info = false;
    row.update();
  } finally {
    row.busy('download', false);
  }
}

async function downloadZip(): Promise<void> {
  const done = batch.succeeded();
  if (done.length === 0) return;
  zipButton.disabled = true;
  const entries: { item: Item; name: string; data: Blob }[] = [];
  const failed: string[] = [];
  try {
    for (const [i, item] of done.entries()) {
      zipButton.textContent = `Fetching ${i + 1} of ${done.length}…`;
      try {
        const res = await api.download(item.job!.id);
        const name = fileNameFromDisposition(res.headers.get('content-disposition')) ?? item.job!.output.fileName;
        entries.push({ item, name, data: await res.blob() });
      } catch (e) {
        failed.push(`${item.name}: ${messageFor(asProblem(e))}`);
      }
    }
    if (entries.length > 0) {
      zipButton.textContent = 'Writing the zip…';
      const names = uniqueNames(entries.map((e) => e.name));
      const archive = await zip(entries.map((e, i) => ({ name: names[i], data: e.data })));
      const stamp = new Date().toISOString().slice(0, 16).replace(/[-:]/g, '').replace('T', '-');
      saveBlob(archive, `compressd-${stamp}.zip`);
    }
    if (failed.length) say(`${failed.length === done.length ? 'No file' : 'Some files'} could not be added to the zip: ${failed.join(' ')}`);
  } catch (e) {
    say(e instanceof Error ? e.message : String(e));
  } finally {
    refreshButtons();
  }
}

function act(action: RowAction, row: JobRow): void {
  const { item } = row;
  switch (action) {
    case 'compare':
      void compare.open(item.job!.id, item.name, item.job!.metrics.perceivedQuality, () => void downloadOne(row));
      return;
    case 'download':
      void downloadOne(row);
      return;
    case 'cancel':
      void batch.cancel(item);
      refreshOptions();
      return;
    case 'retry':
      batch.retry(item);
      return;
    case 'remove': {
      const next = rows.get(batch.items[batch.items.indexOf(item) + 1]?.uid ?? -1) ?? rows.get(batch.items[batch.items.indexOf(item) - 1]?.uid ?? -1);
      batch.remove(item);
      (next?.firstButton() ?? chooseButton).focus();
      return;
    }
    case 'redo':
      redo(item);
      return;
  }
}

zipButton.addEventListener('click', () => void downloadZip());
clearButton.addEventListener('click', () => {
  batch.clearFinished();
  chooseButton.focus();
});

/** The same file as a new row, ready for other options; the finished one stays to compare with. */
function redo(item: Item): void {
  if (!item.file) return;
  addFiles([item.file]);
  const panel = byId<HTMLDetailsElement>('options-panel');
  panel.open = true;
  say(`${item.name} was added again: choose other options, then Compress.`, 'info');
  panel.querySelector('summary')?.focus();
}

const unsent = () => batch.items.filter((i) => i.file !== null && !i.job && UNSENT.has(i.stage));
// Files not yet on the server are lost with the page: ask before leaving, and tell the next load.
window.addEventListener('beforeunload', (e) => {
  if (unsent().length === 0) return;
  e.preventDefault();
  e.returnValue = '';
});
window.addEventListener('pagehide', () => {
  const names = unsent().map((i) => i.name);
  if (names.length) localStorage.setItem(UNSENT_STORAGE, JSON.stringify(names));
  else localStorage.removeItem(UNSENT_STORAGE);
});

function sayWhatWasLost(): void {
  let names: string[] = [];
  try {
    const parsed: unknown = JSON.parse(localStorage.getItem(UNSENT_STORAGE) ?? '[]');
    if (Array.isArray(parsed)) names = parsed.filter((n): n is string => typeof n === 'string');
  } catch {
    // Unreadable: nothing to report.
  }
  localStorage.removeItem(UNSENT_STORAGE);
  if (names.length === 0) return;
  const n = names.length;
  say(`${n} ${n === 1 ? 'file was' : 'files were'} not uploaded when the page was left, so the server never got ${n === 1 ? 'it' : 'them'}: ${names.join(', ')}. Choose ${n === 1 ? 'it' : 'them'} again to compress ${n === 1 ? 'it' : 'them'}.`, 'info');
}
sayWhatWasLost();

const stored = localStorage.getItem(KEY_STORAGE);
if (stored) {
  keyInput.value = stored;
  void useKey(stored);
}
refreshButtons();
