import { Api, ApiProblem, type Entitlements, type Listing } from './api.ts';
import { Batch, type Item } from './batch.ts';
import { CompareDialog } from './compare.ts';
import { byId } from './dom.ts';
import { fileNameFromDisposition, formatBytes, saveBlob, savingsText } from './format.ts';
import { JobRow, type RowAction } from './job-row.ts';
import { messageFor } from './messages.ts';
import { OptionsForm } from './options-form.ts';
import { uniqueNames, zip } from './zip.ts';

const KEY_STORAGE = 'compressd.apiKey';

const api = new Api();
const keyForm = byId<HTMLFormElement>('key-form');
const keyInput = byId<HTMLInputElement>('key-input');
const keyRemember = byId<HTMLInputElement>('key-remember');
const account = byId('account');
const drop = byId('drop');
const fileInput = byId<HTMLInputElement>('file-input');
const limitsText = byId('limits');
const startButton = byId<HTMLButtonElement>('start');
const zipButton = byId<HTMLButtonElement>('zip');
const clearButton = byId<HTMLButtonElement>('clear');
const notice = byId('notice');
const list = byId<HTMLUListElement>('jobs');
const live = byId('live');

const options = new OptionsForm(api, byId<HTMLFormElement>('options'), byId('options-fields'), byId('options-title'));
const compare = new CompareDialog(api);
const rows = new Map<number, JobRow>();
let keyAccepted = false;

function say(text: string, kind: 'error' | 'info' = 'error'): void {
  notice.textContent = text;
  notice.hidden = !text;
  notice.classList.toggle('info', kind === 'info');
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
  clearButton.disabled = !items.some((i) => ['Succeeded', 'Failed', 'Canceled', 'rejected'].includes(i.stage));
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

const batch: Batch = new Batch(api, {
  changed(item) {
    let row = rows.get(item.uid);
    if (!row) {
      row = new JobRow(item, act);
      rows.set(item.uid, row);
      list.append(row.el);
    }
    row.update();
    refreshButtons();
  },
  removed(item) {
    rows.get(item.uid)?.el.remove();
    rows.delete(item.uid);
    refreshButtons();
    refreshOptions();
  },
  keyRefused(p) {
    keyAccepted = false;
    account.textContent = '';
    say(messageFor(p));
    keyInput.focus();
  },
  finished(item) {
    const m = item.job?.metrics;
    announce(item.stage === 'Succeeded' && m ? `${item.file.name}: succeeded, ${savingsText(m.inputBytes, m.outputBytes)}.` : `${item.file.name}: ${item.stage}. ${item.message ?? ''}`);
    scheduleBalance();
  },
});

function showAccount(e: Entitlements): void {
  const who = e.account ? `Account ${e.account}${e.guest ? ' (guest)' : ''}` : 'Key accepted';
  account.textContent = typeof e.balance === 'number' ? `${who} · ${e.balance} credits` : who;
}

let balanceTimer: ReturnType<typeof setTimeout> | null = null;
function scheduleBalance(): void {
  if (balanceTimer) return;
  balanceTimer = setTimeout(() => {
    balanceTimer = null;
    api.entitlements().then(showAccount, () => undefined);
  }, 500);
}

function applyLimits(listing: Listing, e: Entitlements): void {
  const formats = new Set(listing.compressors.flatMap((c) => c.inputFormats));
  batch.limits = {
    formats,
    maxFileSizeBytes: listing.maxFileSizeBytes ?? null,
    maxBatchFiles: listing.maxBatchFiles ?? null,
    maxInFlight: Math.max(1, e.limits?.maxQueuedJobs ?? 6),
  };
  fileInput.accept = [...formats].map((f) => `.${f}`).join(',');
  limitsText.textContent = `Up to ${listing.maxBatchFiles} files, each at most ${formatBytes(listing.maxFileSizeBytes)}. Formats: ${[...formats].sort().join(', ')}.`;
}

/** Checks the key against the server and loads the caller's limits; true when accepted. */
async function useKey(key: string): Promise<boolean> {
  api.key = key.trim();
  account.textContent = 'Checking the key…';
  try {
    const [e, listing] = await Promise.all([api.entitlements(), api.listing()]);
    keyAccepted = true;
    showAccount(e);
    applyLimits(listing, e);
    say('');
    batch.recheck();
    batch.resume();
    refreshOptions();
    return true;
  } catch (err) {
    keyAccepted = false;
    account.textContent = '';
    say(messageFor(asProblem(err)));
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
  }
});

byId('key-forget').addEventListener('click', () => {
  localStorage.removeItem(KEY_STORAGE);
  keyInput.value = '';
  api.key = '';
  keyAccepted = false;
  account.textContent = '';
  say('The key was removed from this browser.', 'info');
  keyInput.focus();
});

function addFiles(files: File[]): void {
  if (files.length === 0) return;
  const left = batch.add(files);
  if (left > 0) say(`At most ${batch.limits.maxBatchFiles} files fit in one batch; ${left} ${left === 1 ? 'file was' : 'files were'} not added. Clear finished files to make room.`);
  else if (!notice.classList.contains('info')) say('');
  refreshOptions();
}

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
    say('Paste a valid API key first.');
    keyInput.focus();
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
        failed.push(`${item.file.name}: ${messageFor(asProblem(e))}`);
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
      void compare.open(item.job!.id, item.file.name);
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
      (next?.firstButton() ?? fileInput).focus();
      return;
    }
  }
}

zipButton.addEventListener('click', () => void downloadZip());
clearButton.addEventListener('click', () => {
  batch.clearFinished();
  fileInput.focus();
});

const stored = localStorage.getItem(KEY_STORAGE);
if (stored) {
  keyInput.value = stored;
  void useKey(stored);
}
refreshButtons();
