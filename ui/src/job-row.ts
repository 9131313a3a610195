import type { Item } from './batch.ts';
import { h } from './dom.ts';
import { formatBytes, savingsText } from './format.ts';

export type RowAction = 'compare' | 'download' | 'cancel' | 'retry' | 'remove';

const CANCELLABLE = new Set(['pending', 'uploading', 'waiting', 'Queued', 'Running']);
const RETRYABLE = new Set(['error', 'Failed', 'Canceled']);
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
      return 'Queued';
    case 'Running': {
      const p = item.job?.progress;
      return `Running ${p?.percent ?? 0}%${p?.phase ? ` · ${p.phase}` : ''}`;
    }
    default:
      return item.stage;
  }
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
  private readonly buttons: Record<RowAction, HTMLButtonElement>;

  constructor(
    readonly item: Item,
    act: (action: RowAction, row: JobRow) => void,
  ) {
    const name = item.file.name;
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
    const parts = [item.format ? item.format.toUpperCase() : 'no extension', formatBytes(item.file.size)];
    this.meta.replaceChildren(parts.join(' · '));
    if (item.stage === 'Succeeded' && m) {
      this.meta.append(` → ${formatBytes(m.outputBytes)} · `, h('span', { class: 'savings', text: savingsText(m.inputBytes, m.outputBytes) }));
    }

    const percent = item.stage === 'uploading' ? item.upload * 100 : item.stage === 'Running' ? (item.job?.progress.percent ?? 0) : null;
    this.progress.hidden = percent === null && item.stage !== 'Queued';
    if (percent === null) this.progress.removeAttribute('value');
    else this.progress.value = Math.round(percent);

    this.message.textContent = item.message ?? '';
    this.message.hidden = !item.message;
    this.message.classList.toggle('info', item.info);

    this.buttons.compare.hidden = item.stage !== 'Succeeded';
    this.buttons.download.hidden = item.stage !== 'Succeeded';
    this.buttons.cancel.hidden = !CANCELLABLE.has(item.stage);
    this.buttons.retry.hidden = !RETRYABLE.has(item.stage);
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
