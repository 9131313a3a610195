// SVG charts of benchmark rows, rendered to PNG with sharp (librsvg): bytes vs SSIM or SSIMULACRA2
// as one panel per file, and time as grouped bars. Plain SVG text so the charts need no browser.
import { writeFile } from 'node:fs/promises';
import sharp from 'sharp';

export interface ChartRow {
  file: string;
  tool: string;
  bytesIn: number;
  bytesOut: number | undefined;
  ssim: number | undefined;
  /** SSIMULACRA2, where the chart is drawn against it. */
  score?: number;
  ms: number;
}

const COLOURS = ['#d62728', '#1f77b4', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#7f7f7f'];
const FONT = 'font-family="DejaVu Sans, sans-serif"';

const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

function legend(tools: string[], x: number, y: number, width: number): { svg: string; height: number } {
  const parts: string[] = [];
  let cx = x;
  let cy = y;
  for (const [i, tool] of tools.entries()) {
    const w = 26 + tool.length * 7.2;
    if (cx + w > x + width) {
      cx = x;
      cy += 20;
    }
    parts.push(`<circle cx="${cx + 6}" cy="${cy - 4}" r="5" fill="${COLOURS[i % COLOURS.length]}"/>`);
    parts.push(`<text x="${cx + 15}" y="${cy}" font-size="12" ${FONT}>${esc(tool)}</text>`);
    cx += w;
  }
  return { svg: parts.join(''), height: cy - y + 20 };
}

/** SSIM on a log scale of 1 − SSIM, so 0.98 and 0.999 are as far apart as 0.8 and 0.98. */
const SSIM_FLOOR = 0.0001;
const ssimY = (s: number, top: number, h: number, worst: number): number => {
  const lo = Math.log10(SSIM_FLOOR);
  const hi = Math.log10(worst);
  const v = Math.log10(Math.max(SSIM_FLOOR, 1 - s));
  return top + (h * (v - lo)) / (hi - lo);
};

/**
 * One panel per file: x is the saving in per cent of the input, y the SSIM against the input
 * (lossless at the top); a dashed line marks `target`. Tools that declined are left out.
 */
export async function savingsVsSsimChart(path: string, title: string, rows: ChartRow[], target: number): Promise<void> {
  const tools = [...new Set(rows.map((r) => r.tool))];
  const files = [...new Set(rows.map((r) => r.file))];
  const cols = Math.min(3, files.length);
  const pw = 330;
  const ph = 250;
  const width = cols * pw + 20;
  const head = legend(tools, 20, 50, width - 40);
  const top = 50 + head.height;
  const height = top + Math.ceil(files.length / cols) * ph + 10;
  const scored = rows.filter((r) => r.ssim !== undefined && r.bytesOut !== undefined);
  const worst = Math.min(0.5, Math.max(0.05, ...scored.map((r) => (1 - (r.ssim ?? 1)) * 1.3)));
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="20" y="28" font-size="18" font-weight="bold" ${FONT}>${esc(title)}</text>`,
    head.svg,
  ];
  for (const [i, file] of files.entries()) {
    const x0 = 10 + (i % cols) * pw + 55;
    const y0 = top + Math.floor(i / cols) * ph + 20;
    const w = pw - 75;
    const h = ph - 70;
    const mine = scored.filter((r) => r.file === file);
    const savings = mine.map((r) => 100 * (1 - (r.bytesOut ?? 0) / r.bytesIn));
    const xmin = Math.min(0, Math.floor(Math.min(...savings, 0) / 10) * 10);
    const xmax = Math.max(10, Math.ceil(Math.max(...savings, 0) / 10) * 10);
    const px = (s: number): number => x0 + (w * (s - xmin)) / (xmax - xmin);
    out.push(`<text x="${x0}" y="${y0 - 6}" font-size="12" font-weight="bold" ${FONT}>${esc(file)}</text>`);
    out.push(`<rect x="${x0}" y="${y0}" width="${w}" height="${h}" fill="none" stroke="#999"/>`);
    for (const s of [0.5, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 1]) {
      if (1 - s > worst) continue;
      const y = ssimY(s, y0, h, worst);
      out.push(`<line x1="${x0}" x2="${x0 + w}" y1="${y}" y2="${y}" stroke="#eee"/>`);
      out.push(`<text x="${x0 - 4}" y="${y + 4}" font-size="10" text-anchor="end" ${FONT}>${s}</text>`);
    }
    const ty = ssimY(target, y0, h, worst);
    out.push(`<line x1="${x0}" x2="${x0 + w}" y1="${ty}" y2="${ty}" stroke="#555" stroke-dasharray="4 3"/>`);
    const step = xmax - xmin > 100 ? 50 : xmax - xmin > 40 ? 20 : 10;
    for (let s = xmin; s <= xmax; s += step) {
      out.push(`<text x="${px(s)}" y="${y0 + h + 14}" font-size="10" text-anchor="middle" ${FONT}>${s}</text>`);
    }
    out.push(`<text x="${x0 + w / 2}" y="${y0 + h + 30}" font-size="11" text-anchor="middle" ${FONT}>savings % (SSIM on the left)</text>`);
    for (const r of mine) {
      const k = tools.indexOf(r.tool);
      const x = px(100 * (1 - (r.bytesOut ?? 0) / r.bytesIn));
      const y = ssimY(r.ssim ?? 1, y0, h, worst);
      out.push(`<circle cx="${x}" cy="${y}" r="6" fill="${COLOURS[k % COLOURS.length]}" fill-opacity="0.8" stroke="white"/>`);
    }
  }
  out.push('</svg>');
  await render(out.join(''), path);
}

/** 100 − SSIMULACRA2 on a log scale from 0.1 (an identical output is drawn there) up: 99.9, 99, 90 and 0 equally apart. */
const LOSS_FLOOR = 0.1;
const lossOf = (score: number): number => Math.log10(Math.max(LOSS_FLOOR, 100 - score));

/**
 * One panel per file: x is 100 − SSIMULACRA2 on a log scale (labelled with the score, lossless on
 * the left), y the saving in per cent of the input; a dashed line marks `target`.
 */
export async function savingsVsScoreChart(path: string, title: string, rows: ChartRow[], target: number): Promise<void> {
  const tools = [...new Set(rows.map((r) => r.tool))];
  const scored = rows.filter((r) => r.score !== undefined && r.bytesOut !== undefined);
  const files = [...new Set(scored.map((r) => r.file))];
  if (files.length === 0) return;
  const cols = Math.min(3, files.length);
  const [pw, ph] = [330, 250];
  const width = cols * pw + 20;
  const head = legend(tools, 20, 50, width - 40);
  const top = 50 + head.height;
  const hi = Math.max(2, Math.ceil(Math.max(...scored.map((r) => lossOf(r.score ?? 100)))));
  const lo = Math.log10(LOSS_FLOOR);
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${top + Math.ceil(files.length / cols) * ph + 10}">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="20" y="28" font-size="18" font-weight="bold" ${FONT}>${esc(title)}</text>`,
    head.svg,
  ];
  for (const [i, file] of files.entries()) {
    const box = { x0: 10 + (i % cols) * pw + 55, y0: top + Math.floor(i / cols) * ph + 20, w: pw - 75, h: ph - 70 };
    const mine = scored.filter((r) => r.file === file);
    out.push(scorePanel(file, mine, tools, box, { lo, hi, target }));
  }
  out.push('</svg>');
  await render(out.join(''), path);
}

function scorePanel(file: string, rows: ChartRow[], tools: string[], b: { x0: number; y0: number; w: number; h: number }, axis: { lo: number; hi: number; target: number }): string {
  const savings = rows.map((r) => 100 * (1 - (r.bytesOut ?? 0) / r.bytesIn));
  const ymin = Math.min(0, Math.floor(Math.min(...savings) / 10) * 10);
  const ymax = Math.max(10, Math.ceil(Math.max(...savings) / 10) * 10);
  const px = (score: number): number => b.x0 + (b.w * (lossOf(score) - axis.lo)) / (axis.hi - axis.lo);
  const py = (s: number): number => b.y0 + b.h - (b.h * (s - ymin)) / (ymax - ymin);
  const out = [
    `<text x="${b.x0}" y="${b.y0 - 6}" font-size="12" font-weight="bold" ${FONT}>${esc(file)}</text>`,
    `<rect x="${b.x0}" y="${b.y0}" width="${b.w}" height="${b.h}" fill="none" stroke="#999"/>`,
  ];
  for (let e = axis.lo; e <= axis.hi + 1e-9; e++) {
    const x = b.x0 + (b.w * (e - axis.lo)) / (axis.hi - axis.lo);
    out.push(`<line x1="${x}" x2="${x}" y1="${b.y0}" y2="${b.y0 + b.h}" stroke="#eee"/>`);
    out.push(`<text x="${x}" y="${b.y0 + b.h + 14}" font-size="10" text-anchor="middle" ${FONT}>${+(100 - 10 ** e).toFixed(1)}</text>`);
  }
  out.push(`<line x1="${px(axis.target)}" x2="${px(axis.target)}" y1="${b.y0}" y2="${b.y0 + b.h}" stroke="#555" stroke-dasharray="4 3"/>`);
  const step = ymax - ymin > 100 ? 50 : ymax - ymin > 40 ? 20 : 10;
  for (let s = ymin; s <= ymax; s += step) out.push(`<text x="${b.x0 - 4}" y="${py(s) + 4}" font-size="10" text-anchor="end" ${FONT}>${s}</text>`);
  out.push(`<text x="${b.x0 + b.w / 2}" y="${b.y0 + b.h + 30}" font-size="11" text-anchor="middle" ${FONT}>SSIMULACRA2 (log of 100 − score); savings % up</text>`);
  // The first tool (ours) is drawn last, so peers' settings at the same place do not hide it.
  const order = [...rows.keys()].sort((a, b) => tools.indexOf(rows[b].tool) - tools.indexOf(rows[a].tool));
  for (const k of order) {
    const colour = COLOURS[tools.indexOf(rows[k].tool) % COLOURS.length];
    out.push(`<circle cx="${px(rows[k].score ?? 100)}" cy="${py(savings[k])}" r="6" fill="${colour}" fill-opacity="0.8" stroke="white"/>`);
  }
  return out.join('');
}

/** Median time per tool and file as horizontal bars on a log scale, grouped by file. */
export async function timeChart(path: string, title: string, rows: ChartRow[]): Promise<void> {
  const lo = Math.floor(Math.log10(Math.max(1, Math.min(...rows.map((r) => r.ms)))));
  const hi = Math.ceil(Math.log10(Math.max(10, ...rows.map((r) => r.ms))));
  const ticks = Array.from({ length: hi - lo + 1 }, (_, i) => 10 ** (lo + i)).map((v) => ({ value: v, label: v >= 1000 ? `${v / 1000} s` : `${v} ms`, strong: false }));
  const scale = (ms: number): number => (Math.log10(Math.max(1, ms)) - lo) / Math.max(1, hi - lo);
  await barChart(path, title, rows.map((r) => ({ file: r.file, tool: r.tool, value: r.ms })), scale, ticks, (v) => v.toFixed(0));
}

/** A ratio per tool and file (ours / peer) as bars on a linear scale, with lines at `marks`. */
export async function ratioChart(path: string, title: string, rows: { file: string; tool: string; value: number }[], marks: number[]): Promise<void> {
  const top = Math.max(1.5, Math.ceil(Math.max(...rows.map((r) => r.value)) * 4) / 4);
  const step = top > 3 ? 0.5 : 0.25;
  const ticks = Array.from({ length: Math.floor(top / step) + 1 }, (_, i) => i * step).map((v) => ({ value: v, label: v.toFixed(2), strong: false }));
  ticks.push(...marks.map((v) => ({ value: v, label: '', strong: true })));
  await barChart(path, title, rows, (v) => v / top, ticks, (v) => v.toFixed(2));
}

/** Horizontal bars grouped by file, one colour per tool; `scale` maps a value to 0–1 of the width. */
async function barChart(
  path: string,
  title: string,
  rows: { file: string; tool: string; value: number }[],
  scale: (v: number) => number,
  ticks: { value: number; label: string; strong: boolean }[],
  label: (v: number) => string,
): Promise<void> {
  const tools = [...new Set(rows.map((r) => r.tool))];
  const files = [...new Set(rows.map((r) => r.file))];
  const width = 900;
  const head = legend(tools, 20, 50, width - 40);
  const labelW = 230;
  const bar = 12;
  const group = tools.length * bar + 18;
  const top = 50 + head.height + 10;
  const height = top + files.length * group + 40;
  const w = width - labelW - 40;
  const px = (v: number): number => labelW + w * scale(v);
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="20" y="28" font-size="18" font-weight="bold" ${FONT}>${esc(title)}</text>`,
    head.svg,
  ];
  for (const t of ticks) {
    const x = px(t.value);
    out.push(`<line x1="${x}" x2="${x}" y1="${top - 6}" y2="${height - 30}" stroke="${t.strong ? '#555' : '#ddd'}"${t.strong ? ' stroke-dasharray="4 3"' : ''}/>`);
    if (t.label) out.push(`<text x="${x}" y="${height - 14}" font-size="11" text-anchor="middle" ${FONT}>${t.label}</text>`);
  }
  for (const [g, file] of files.entries()) {
    const y0 = top + g * group;
    out.push(`<text x="${labelW - 8}" y="${y0 + (tools.length * bar) / 2 + 4}" font-size="12" text-anchor="end" ${FONT}>${esc(file)}</text>`);
    for (const [k, tool] of tools.entries()) {
      const r = rows.find((x) => x.file === file && x.tool === tool);
      if (!r) continue;
      const y = y0 + k * bar;
      out.push(`<rect x="${labelW}" y="${y}" width="${Math.max(1, px(r.value) - labelW)}" height="${bar - 2}" fill="${COLOURS[k % COLOURS.length]}"/>`);
      out.push(`<text x="${px(r.value) + 4}" y="${y + bar - 3}" font-size="9" ${FONT}>${label(r.value)}</text>`);
    }
  }
  out.push('</svg>');
  await render(out.join(''), path);
}

async function render(svg: string, path: string): Promise<void> {
  await writeFile(path, await sharp(Buffer.from(svg)).png().toBuffer());
}
