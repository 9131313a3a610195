import { ApiProblem, type Api, type CompareResult } from './api.ts';
import { byId, h } from './dom.ts';
import { formatBytes, savingsText } from './format.ts';
import { messageFor } from './messages.ts';

/**
 * The before/after dialog: the two previews stacked, the "before" one clipped at the split.
 * The split is a native range input laid over the picture, so dragging, clicking, touch and the
 * arrow/Home/End/Page keys all work and screen readers announce it.
 */
export class CompareDialog {
  private readonly dialog = byId<HTMLDialogElement>('compare');
  private readonly title = byId('compare-title');
  private readonly status = byId('compare-status');
  private readonly figure = byId('compare-figure');
  private readonly frame = byId('compare-frame');
  private readonly before = byId<HTMLImageElement>('compare-before');
  private readonly after = byId<HTMLImageElement>('compare-after');
  private readonly split = byId<HTMLInputElement>('compare-split');
  private readonly facts = byId('compare-facts');
  private request = 0;

  constructor(private readonly api: Api) {
    byId('compare-close').addEventListener('click', () => this.dialog.close());
    this.split.addEventListener('input', () => this.setSplit(Number(this.split.value)));
    this.dialog.addEventListener('click', (e) => {
      if (e.target === this.dialog) this.dialog.close();
    });
    this.dialog.addEventListener('close', () => {
      this.request++;
      this.before.removeAttribute('src');
      this.after.removeAttribute('src');
    });
  }

  async open(jobId: string, name: string): Promise<void> {
    const request = ++this.request;
    this.title.textContent = `Compare: ${name}`;
    this.figure.hidden = true;
    this.status.textContent = 'Loading the previews…';
    this.status.classList.remove('notice');
    if (!this.dialog.open) this.dialog.showModal();
    let result: CompareResult;
    try {
      result = await this.api.compare(jobId);
    } catch (e) {
      if (request !== this.request) return;
      const p = e instanceof ApiProblem ? e : new ApiProblem('network', 0, null);
      this.status.textContent = messageFor(p);
      this.status.classList.add('notice');
      this.status.dataset.code = p.code;
      return;
    }
    if (request !== this.request) return;
    await this.show(result);
    if (request !== this.request) return;
    this.status.textContent = '';
    delete this.status.dataset.code;
    this.figure.hidden = false;
    this.split.focus();
  }

  private async show(r: CompareResult): Promise<void> {
    const loaded = (img: HTMLImageElement, src: string) =>
      new Promise<void>((resolve) => {
        img.onload = img.onerror = () => resolve();
        img.src = src;
      });
    await Promise.all([loaded(this.before, `data:${r.beforeMimeType};base64,${r.beforeImage}`), loaded(this.after, `data:${r.afterMimeType};base64,${r.afterImage}`)]);
    // Both previews fill the same box (the "before" aspect), so a resized output lines up with its original.
    const w = r.previewWidth || r.afterPreviewWidth || 1;
    const ht = r.previewHeight || r.afterPreviewHeight || 1;
    this.frame.style.setProperty('aspect-ratio', `${w} / ${ht}`);
    this.frame.style.setProperty('width', `min(100%, ${w}px, calc(68vh * ${w / ht}))`);
    this.split.value = '50';
    this.setSplit(50);

    const dims = (a: number, b: number) => (a && b ? `${a} × ${b} px` : '—');
    const fact = (label: string, value: string, cls?: string) => h('div', {}, h('dt', { text: label }), h('dd', { text: value, class: cls }));
    this.facts.replaceChildren(
      fact('Before', `${formatBytes(r.originalBytes)} · ${dims(r.inputWidth, r.inputHeight)}`),
      fact('After', `${formatBytes(r.compressedBytes)} · ${dims(r.outputWidth, r.outputHeight)}${r.wasResized ? ' (resized)' : ''}`),
      fact('Saved', `${formatBytes(Math.max(0, r.originalBytes - r.compressedBytes))} · ${savingsText(r.originalBytes, r.compressedBytes)}`, 'savings'),
    );
  }

  private setSplit(percent: number): void {
    this.frame.style.setProperty('--split', `${percent}%`);
    this.split.setAttribute('aria-valuetext', `${percent}% before, ${100 - percent}% after`);
  }
}
