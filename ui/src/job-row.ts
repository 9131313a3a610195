import type { Item } from './batch.ts';
import { h } from './dom.ts';
import { extensionOf, formatBytes, savingsText } from './format.ts';

export type RowAction = 'compare' | 'download' | 'cancel' | 'retry' | 'redo' | 'remove';

/** The formats a compressor (a job type) makes of a source format, by the catalog's output rule. */
export type OutputsOf = (format: string, jobType: string) => string[];

const CANCELLABLE = new Set(['pending', 'uploading', 'waiting', 'Queued', 'Running']);
const REMOVABLE = new Set(['ready', 'rejected', 'error', 'Succeeded', 'Failed', 'Canceled']);
const FINISHED = new Set(['Succeeded', 'Failed', 'Canceled']);

function statusText(item: Item): string {
  switch (item.stage) {
    case 'ready':
      return 'Ready';
    case 'rejected':
      return 'Not accepted';
    case 'pending':
      return 'Waiting to upload';
    case 'uploading':
      return `Uploading ${Math.round(item.upload * 100)}%`;
    case 'waiting':
      return 'Waiting for the server';
    case 'error':
      return 'Not sent';
    case 'Queued':
      return 'Waiting on the server';
    case 'Running': {
      const p = item.job?.progress;
      return `Compressing ${p?.percent ?? 0}%`;
    }
    case 'Succeeded':
      return 'Done';
    case 'Canceled':
      return 'Stopped';
    default:
      return item.stage;
  }
}

const label = (format: string) => format.toUpperCase().replace('JPEG', 'JPG');

/**
 * "HEIC → JPG": the output's type where it differs from the input's. Once the job succeeded, its
 * output says it; before, the catalog's rule for the compressor the server chose ("HEIC → JPG or
 * PNG": the universal compressor decides by the picture's alpha), never the status's provisional name.
 */
function formats(item: Item, outputsOf: OutputsOf): string {
  const input = item.format ? label(item.format) : 'No extension';
  const job = item.job;
  const outputs = !job ? [] : item.stage === 'Succeeded' && job.output.fileName ? [extensionOf(job.output.fileName)] : outputsOf(item.format, job.jobType);
  const out = [...new Set(outputs.map(label))].sort();
  return out.length === 0 || (out.length === 1 && out[0] === label(input)) ? input : `${input} → ${out.join(' or ')}`;
}

/**
 * One file's row. Its elements are made once and updated in place, so a focused button keeps
 * focus while the job is polled.
 */
export class JobRow {
  readonly el: HTMLLIElement;
  private readonly status = h('span', { class: 'status' });
  private readonly meta = h('div', { class: 'meta' });
  private readonly progress = h('progress', { max: 100 });
  private readonly outputsOf: OutputsOf;
  private readonly message = h('p', { class: 'message', role: 'status' });
  private readonly location = h('p', {
    class: 'message location',
    text: 'Keeps the camera’s location (GPS): anyone you send this photo to can see where it was taken.',
  });
  private readonly buttons: Record<RowAction, HTMLButtonElement>;

  constructor(
    readonly item: Item,
    act: (action: RowAction, row: JobRow) => void,
    outputsOf: OutputsOf,
  ) {
    this.outputsOf = outputsOf;
    const name = item.name;
    const button = (action: RowAction, text: string) => {
      const b = h('button', { type: 'button', class: 'small', 'data-action': action, 'aria-label': `${text} ${name}`, text });
      b.addEventListener('click', () => act(action, this));
      return b;
    };
    this.buttons = {
      compare: button('compare', 'Compare'),
      download: button('download', 'Download'),
      cancel: button('cancel', 'Cancel'),
      retry: button('retry', 'Retry'),
      redo: button('redo', 'Redo'),
      remove: button('remove', 'Remove'),
    };
    this.progress.setAttribute('aria-label', `Progress of ${name}`);
    this.buttons.redo.setAttribute('aria-label', `Redo ${name} with other options`);
    this.el = h(
      'li',
      { class: 'job', 'data-uid': item.uid },
      // The bar shares the status's line, so a row keeps its height when the bar comes and goes.
      h('div', { class: 'info' }, h('div', { class: 'name', text: name }), this.meta, h('div', { class: 'state' }, this.status, this.progress)),
      h('div', { class: 'buttons' }, ...Object.values(this.buttons)),
      this.message,
      this.location,
    );
    this.update();
  }

  update(): void {
    const { item } = this;
    this.el.dataset.stage = item.stage;
    if (item.job) this.el.dataset.jobId = item.job.id;
    else delete this.el.dataset.jobId;
    this.status.textContent = statusText(item);

    const m = item.job?.metrics;
    this.meta.replaceChildren(`${formats(item, this.outputsOf)} · ${formatBytes(item.size)}`);
    if (item.stage === 'Succeeded' && m) {
      this.meta.append(` → ${formatBytes(m.outputBytes)} · `, h('span', { class: 'savings', text: savingsText(m.inputBytes, m.outputBytes) }));
    }

    // A bar only where something measurable moves; a file that waits says so in words.
    const percent = item.stage === 'uploading' ? item.upload * 100 : item.stage === 'Running' ? (item.job?.progress.percent ?? 0) : null;
    this.progress.hidden = percent === null;
    if (percent !== null) this.progress.value = Math.round(percent);

    this.message.textContent = item.message ?? '';
    this.message.hidden = !item.message;
    this.message.classList.toggle('info', item.info);
    this.location.hidden = !(item.stage === 'Succeeded' && item.location);

    this.buttons.compare.hidden = item.stage !== 'Succeeded';
    this.buttons.download.hidden = item.stage !== 'Succeeded';
    this.buttons.cancel.hidden = !CANCELLABLE.has(item.stage);
    this.buttons.retry.hidden = !item.retryable;
    this.buttons.redo.hidden = !(FINISHED.has(item.stage) && item.file !== null);
    this.buttons.remove.hidden = !REMOVABLE.has(item.stage);

    // A keyboard user on a button that just disappeared (Cancel when the job ends) stays in the row.
    const focused = document.activeElement;
    if (focused instanceof HTMLButtonElement && focused.hidden && this.el.contains(focused)) this.firstButton()?.focus();
  }

  busy(action: RowAction, on: boolean, text?: string): void {
    const b = this.buttons[action];
    b.disabled = on;
    if (text) b.textContent = text;
  }

  /** A focus target that survives the update: the first visible button. */
  firstButton(): HTMLButtonElement | undefined {
    return Object.values(this.buttons).find((b) => !b.hidden);
  }
}
