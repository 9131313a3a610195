import { ApiProblem, type Api, type CompareView } from './api.ts';
import { byId, h } from './dom.ts';
import { formatBytes, qualityText, savingsText } from './format.ts';
import { messageFor } from './messages.ts';

const MAX_ZOOM = 8;
const STEP = 1.5;
/** One PDF point at a reader's 100% (96 CSS px per inch, 72 points per inch). */
const PX_PER_POINT = 96 / 72;

interface Shown {
  jobId: string;
  page: number;
  size: 'fit' | 'full';
  view: CompareView;
}

/**
 * The before/after dialog. Both previews sit in one frame under the same zoom and pan (fit,
 * 100%, wheel, pinch, drag, keyboard); the "before" layer is clipped at the split. The split is a
 * native range input under the picture (arrow keys, screen readers) and can be dragged by its
 * handle. The first look is the quick `fit` preview; zooming past its pixels fetches the `full`
 * one once, and swaps it in without moving the view.
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
  private readonly subject = byId('compare-subject');
  private readonly pageBox = byId('compare-page-box');
  private readonly pageSelect = byId<HTMLSelectElement>('compare-page');
  private readonly zoomLevel = byId('zoom-level');
  private readonly note = byId('compare-note');
  private request = 0;
  private shown: Shown | null = null;
  private fullLoading: Promise<void> | null = null;
  private download: (() => void) | null = null;
  /** The job's `metrics.perceivedQuality`: the previews come from the compare route, this from the job's status. */
  private quality: number | null = null;
  /** Content size (pixels of the loaded "before" preview), screen pixels per content pixel, offset. */
  private cw = 1;
  private ch = 1;
  private scale = 1;
  private tx = 0;
  private ty = 0;
  private fitted = true;
  private readonly pointers = new Map<number, { x: number; y: number }>();
  private drag: 'pan' | 'split' | null = null;

  constructor(private readonly api: Api) {
    byId('compare-close').addEventListener('click', () => this.dialog.close());
    byId('compare-download').addEventListener('click', () => this.download?.());
    byId('zoom-fit').addEventListener('click', () => this.fit());
    byId('zoom-1').addEventListener('click', () => this.zoomTo(this.actualScale()));
    byId('zoom-in').addEventListener('click', () => this.zoomTo(this.scale * STEP));
    byId('zoom-out').addEventListener('click', () => this.zoomTo(this.scale / STEP));
    this.split.addEventListener('input', () => this.setSplit(Number(this.split.value)));
    this.pageSelect.addEventListener('change', () => void this.load(Number(this.pageSelect.value)));
    this.dialog.addEventListener('click', (e) => {
      if (e.target === this.dialog) this.dialog.close();
    });
    this.dialog.addEventListener('close', () => {
      this.request++;
      this.shown = null;
      this.before.removeAttribute('src');
      this.after.removeAttribute('src');
    });
    this.frame.addEventListener('wheel', (e) => this.onWheel(e), { passive: false });
    this.frame.addEventListener('pointerdown', (e) => this.onPointerDown(e));
    this.frame.addEventListener('pointermove', (e) => this.onPointerMove(e));
    for (const type of ['pointerup', 'pointercancel'] as const) this.frame.addEventListener(type, (e) => this.onPointerUp(e));
    this.frame.addEventListener('keydown', (e) => this.onKey(e));
    new ResizeObserver(() => (this.fitted ? this.fit() : this.apply())).observe(this.frame);
  }

  async open(jobId: string, name: string, quality: number | null, download: () => void): Promise<void> {
    this.download = download;
    this.quality = quality;
    this.title.textContent = `Compare: ${name}`;
    this.figure.hidden = true;
    this.pageBox.hidden = true;
    if (!this.dialog.open) this.dialog.showModal();
    if (await this.load(1, jobId)) this.split.focus();
  }

  /** Loads the quick previews of a page (1 for anything but a PDF); true when they are shown. */
  private async load(page: number, jobId = this.shown?.jobId): Promise<boolean> {
    if (!jobId) return false;
    const request = ++this.request;
    this.fullLoading = null;
    this.setStatus('Loading the previews…');
    let view: CompareView;
    try {
      view = await this.api.compare(jobId, 'fit', page);
    } catch (e) {
      if (request === this.request) this.setProblem(e);
      return false;
    }
    if (request !== this.request) return false;
    await this.showImages(view);
    if (request !== this.request) return false;
    // A picture no larger than the quick preview is already shown at its own pixels.
    const complete = !view.page && view.previewWidth === view.inputWidth && view.afterPreviewWidth === view.outputWidth;
    this.shown = { jobId, page, size: complete ? 'full' : 'fit', view };
    this.setStatus('');
    this.figure.hidden = false;
    this.describe(view);
    this.split.value = '50';
    this.setSplit(50);
    this.fit();
    return true;
  }

  /** Swaps in the full-size previews (once per page), keeping what is on screen where it is. */
  private loadFull(): Promise<void> {
    const shown = this.shown;
    if (!shown || shown.size === 'full') return Promise.resolve();
    this.fullLoading ??= (async () => {
      const request = this.request;
      this.note.textContent = 'Loading full resolution…';
      try {
        const view = await this.api.compare(shown.jobId, 'full', shown.page);
        if (request !== this.request) return;
        const old = this.cw;
        await this.showImages(view);
        if (request !== this.request) return;
        this.scale *= old / this.cw;
        this.shown = { ...shown, size: 'full', view };
        this.note.textContent = 'Full resolution';
        this.apply();
      } catch (e) {
        if (request === this.request) this.note.textContent = messageFor(e instanceof ApiProblem ? e : new ApiProblem('network', 0, null));
        this.fullLoading = null;
      }
    })();
    return this.fullLoading;
  }

  private async showImages(r: CompareView): Promise<void> {
    const loaded = (img: HTMLImageElement, src: string) =>
      new Promise<void>((resolve) => {
        img.onload = img.onerror = () => resolve();
        img.src = src;
      });
    await Promise.all([loaded(this.before, `data:${r.beforeMimeType};base64,${r.beforeImage}`), loaded(this.after, `data:${r.afterMimeType};base64,${r.afterImage}`)]);
    // Both previews fill the "before" box, so a resized output lines up with its original.
    this.cw = r.previewWidth || r.afterPreviewWidth || 1;
    this.ch = r.previewHeight || r.afterPreviewHeight || 1;
    for (const img of [this.before, this.after]) {
      img.style.width = `${this.cw}px`;
      img.style.height = `${this.ch}px`;
    }
  }

  private describe(r: CompareView): void {
    const pdf = r.page !== null;
    const unit = pdf ? 'pt' : 'px';
    const dims = (a: number, b: number) => (a && b ? `${a} × ${b} ${unit}` : '—');
    if (r.page) {
      this.pageSelect.replaceChildren(...Array.from({ length: r.page.count }, (_, i) => h('option', { value: i + 1, text: `${i + 1}`, selected: i + 1 === r.page!.number })));
      byId('compare-page-count').textContent = `of ${r.page.count}`;
      this.pageBox.hidden = r.page.count < 2;
      this.subject.textContent = r.page.count < 2 ? 'A one-page document' : '';
    } else {
      this.pageBox.hidden = true;
      this.subject.textContent = r.picture ? `The largest picture in the document: ${r.picture.split('/').pop()}` : '';
    }
    this.subject.hidden = !this.subject.textContent;
    const changed = r.wasResized ? (r.picture ? ' (scaled to its size on the page)' : pdf ? '' : ' (resized)') : '';
    const fact = (label: string, value: string, cls?: string) => h('div', {}, h('dt', { text: label }), h('dd', { text: value, class: cls }));
    const what = pdf ? 'page size' : 'picture';
    this.facts.replaceChildren(
      fact('Before', `${formatBytes(r.originalBytes)} · ${what} ${dims(r.inputWidth, r.inputHeight)}`),
      fact('After', `${formatBytes(r.compressedBytes)} · ${what} ${dims(r.outputWidth, r.outputHeight)}${changed}`),
      fact('Saved', `${formatBytes(Math.max(0, r.originalBytes - r.compressedBytes))} · ${savingsText(r.originalBytes, r.compressedBytes)}`, 'savings'),
      // A document's number is its worst picture, which need not be the page or picture shown.
      ...(this.quality === null ? [] : [fact(pdf || r.picture ? 'Perceived quality (lowest picture)' : 'Perceived quality', qualityText(this.quality))]),
    );
    this.note.textContent = '';
  }

  private setStatus(text: string): void {
    this.status.textContent = text;
    this.status.classList.remove('notice');
    delete this.status.dataset.code;
  }

  private setProblem(e: unknown): void {
    const p = e instanceof ApiProblem ? e : new ApiProblem('network', 0, null);
    this.status.textContent = messageFor(p);
    this.status.classList.add('notice');
    this.status.dataset.code = p.code;
    this.figure.hidden = true;
  }

  // --- zoom and pan -------------------------------------------------------------------------

  /** Screen pixels per content pixel that show the picture at 100% (a PDF page as a reader does at 100%). */
  private actualScale(): number {
    const v = this.shown?.view;
    if (!v) return 1;
    const width100 = v.page ? v.inputWidth * PX_PER_POINT : v.inputWidth;
    return width100 / this.cw;
  }

  private fitScale(): number {
    const { width, height } = this.frame.getBoundingClientRect();
    return Math.min(width / this.cw, height / this.ch, this.actualScale());
  }

  fit(): void {
    this.scale = this.fitScale();
    this.fitted = true;
    this.apply();
  }

  /** Zooms to `scale` around a point of the frame (its centre by default). */
  private zoomTo(scale: number, at?: { x: number; y: number }): void {
    const { width, height } = this.frame.getBoundingClientRect();
    const min = this.fitScale();
    const max = this.actualScale() * MAX_ZOOM;
    const next = Math.min(max, Math.max(min, scale));
    const p = at ?? { x: width / 2, y: height / 2 };
    this.tx = p.x - ((p.x - this.tx) * next) / this.scale;
    this.ty = p.y - ((p.y - this.ty) * next) / this.scale;
    this.scale = next;
    this.fitted = next <= min + 1e-9;
    if (this.fitted) this.fit();
    else this.apply();
    // Past the quick preview's own pixels (device pixels, on a high-density screen), the full-size one is worth fetching.
    if (next * window.devicePixelRatio > 1.01) void this.loadFull();
  }

  private panBy(dx: number, dy: number): void {
    this.tx += dx;
    this.ty += dy;
    this.apply();
  }

  /** Keeps the picture covering the frame (or centred where it is smaller) and draws it. */
  private apply(): void {
    const { width, height } = this.frame.getBoundingClientRect();
    const w = this.cw * this.scale;
    const hh = this.ch * this.scale;
    this.tx = w <= width ? (width - w) / 2 : Math.min(0, Math.max(width - w, this.tx));
    this.ty = hh <= height ? (height - hh) / 2 : Math.min(0, Math.max(height - hh, this.ty));
    const transform = `translate(${this.tx}px, ${this.ty}px) scale(${this.scale})`;
    this.before.style.transform = transform;
    this.after.style.transform = transform;
    const percent = Math.round((this.scale / this.actualScale()) * 100);
    this.zoomLevel.textContent = this.fitted ? `Fit (${percent}%)` : `${percent}%`;
    this.frame.dataset.zoom = String(percent);
    this.frame.classList.toggle('zoomed', !this.fitted);
  }

  private point(e: { clientX: number; clientY: number }): { x: number; y: number } {
    const r = this.frame.getBoundingClientRect();
    return { x: e.clientX - r.left, y: e.clientY - r.top };
  }

  private onWheel(e: WheelEvent): void {
    e.preventDefault();
    const delta = e.deltaMode === 1 ? e.deltaY * 16 : e.deltaY;
    this.zoomTo(this.scale * Math.exp(-delta * 0.0015), this.point(e));
  }

  private onPointerDown(e: PointerEvent): void {
    const p = this.point(e);
    this.pointers.set(e.pointerId, p);
    // Capture keeps a drag going outside the frame; a pointer the browser no longer tracks cannot be captured.
    if (e.isTrusted) this.frame.setPointerCapture(e.pointerId);
    if (this.pointers.size === 1) {
      const splitX = (Number(this.split.value) / 100) * this.frame.getBoundingClientRect().width;
      // Near the handle (or anywhere while the whole picture is in view) the drag moves the split.
      this.drag = Math.abs(p.x - splitX) < 24 || this.fitted ? 'split' : 'pan';
      if (this.drag === 'split') this.splitAt(p.x);
    }
  }

  private onPointerMove(e: PointerEvent): void {
    const last = this.pointers.get(e.pointerId);
    if (!last) return;
    const p = this.point(e);
    if (this.pointers.size === 2) {
      const [a, b] = [...this.pointers.values()];
      const other = a === last ? b : a;
      const before = Math.hypot(last.x - other.x, last.y - other.y);
      const now = Math.hypot(p.x - other.x, p.y - other.y);
      const mid = { x: (p.x + other.x) / 2, y: (p.y + other.y) / 2 };
      if (before > 0) this.zoomTo(this.scale * (now / before), mid);
      this.panBy((p.x - last.x) / 2, (p.y - last.y) / 2);
    } else if (this.drag === 'split') this.splitAt(p.x);
    else if (this.drag === 'pan') this.panBy(p.x - last.x, p.y - last.y);
    this.pointers.set(e.pointerId, p);
  }

  private onPointerUp(e: PointerEvent): void {
    this.pointers.delete(e.pointerId);
    if (this.pointers.size === 0) this.drag = null;
  }

  private onKey(e: KeyboardEvent): void {
    const { width, height } = this.frame.getBoundingClientRect();
    const pan: Record<string, [number, number]> = { ArrowLeft: [width / 8, 0], ArrowRight: [-width / 8, 0], ArrowUp: [0, height / 8], ArrowDown: [0, -height / 8] };
    if (e.key === '+' || e.key === '=') this.zoomTo(this.scale * STEP);
    else if (e.key === '-' || e.key === '_') this.zoomTo(this.scale / STEP);
    else if (e.key === '0') this.fit();
    else if (e.key === '1') this.zoomTo(this.actualScale());
    else if (pan[e.key]) this.panBy(...pan[e.key]);
    else return;
    e.preventDefault();
  }

  private splitAt(x: number): void {
    const percent = Math.round(Math.min(100, Math.max(0, (x / this.frame.getBoundingClientRect().width) * 100)));
    this.split.value = String(percent);
    this.setSplit(percent);
  }

  private setSplit(percent: number): void {
    this.frame.style.setProperty('--split', `${percent}%`);
    this.split.setAttribute('aria-valuetext', `${percent}% before, ${100 - percent}% after`);
  }
}
