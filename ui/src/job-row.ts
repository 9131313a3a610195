import type { Item } from './batch.ts';
import { h } from './dom.ts';
import { extensionOf, formatBytes, savingsText } from './format.ts';

export type RowAction = 'compare' | 'download' | 'cancel' | 'retry' | 'remove';

const CANCELLABLE = new Set(['pending', 'uploading', 'waiting', 'Queued', 'Running']);
const REMOVABLE = new Set(['ready', 'rejected', 'error', 'Succeeded', 'Failed', 'Canceled']);

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

/** "HEIC → JPG": the output's type where it differs from the input's (known from the job's output name). */
function formats(item: Item): string {
  const input = item.format ? item.format.toUpperCase() : 'No extension';
  const out = item.job?.output.fileName ? extensionOf(item.job.output.fileName).toUpperCase() : '';
  const same = (a: string, b: string) => a.replace('JPEG', 'JPG') === b.replace('JPEG', 'JPG');
  return out && !same(input, out) ? `${input} → ${out}` : input;
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
  private readonly message = h('p', { class: 'message', role: 'status' });
  private readonly location = h('p', {
    class: 'message location',
    text: 'Keeps the camera’s location (GPS): anyone you send this photo to can see where it was taken.',
  });
  private readonly buttons: Record<RowAction, HTMLButtonElement>;

  constructor(
    readonly item: Item,
    act: (action: RowAction, row: JobRow) => void,
  ) {
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
      remove: button('remove', 'Remove'),
    };
    this.progress.setAttribute('aria-label', `Progress of ${name}`);
    this.el = h(
      'li',
      { class: 'job', 'data-uid': item.uid },
      h('div', { class: 'info' }, h('div', { class: 'name', text: name }), this.meta, this.status, this.progress),
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
    this.meta.replaceChildren(`${formats(item)} · ${formatBytes(item.size)}`);
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
