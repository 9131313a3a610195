/**
 * Whole-picture pixel loops in WebAssembly (pixels.c): on a scanned page's picture of tens of
 * megapixels each took most of a second in JavaScript. Each gives the bytes its JavaScript
 * definition gave (the same double-precision arithmetic, Math.round's halves up). Pictures pass
 * through the module's memory a band at a time, so a thread keeps a few megabytes of it, and a
 * colour picture is told from a grey one after its first band.
 */

import { WasmArena } from '../../shared/wasm.ts';
import { PIXELS_WASM_BASE64 } from './pixels-wasm.ts';

interface PixelExports {
  grey_of(px: number, out: number, n: number, c: number, tol: number): number;
  box_view(px: number, w: number, c: number, x0: number, x1: number, W: number, y0: number, y1: number, H: number, columns: number, out: number): void;
  bilinear_view(px: number, w: number, h: number, c: number, xi: number, xf: number, W: number, H: number, top: number, bottom: number, out: number): void;
  filter_rows(samples: number, rows: number, rowBytes: number, colors: number, above: number, trial: number, best: number, out: number): void;
  heap_base(): number;
}

/** pixels.c's stack and its division tables (64 KB) fit in these pages. */
const STATIC_PAGES = 4;
/** Source bytes a kernel is given at a time. */
const BAND_BYTES = 4 * 1024 ** 2;
/** A thread keeps the module's memory up to this; more (a large magnified view) is let go after its call. */
const KEEP_BYTES = 32 * 1024 ** 2;

const kernels = new WasmArena<PixelExports>(PIXELS_WASM_BASE64, STATIC_PAGES, KEEP_BYTES);

/**
 * `n` pixels of `c` ≥ 3 interleaved channels as one grey channel, BT.601 luma rounded, while
 * every pixel's R, G and B are within `tolerance` of each other; undefined at the first that is not.
 */
export function greyPixels(data: Uint8Array, n: number, c: number, tolerance: number): Buffer | undefined {
  const { exports: k } = kernels.take();
  const band = Math.max(16, Math.floor(BAND_BYTES / c));
  const input = kernels.alloc(band * c);
  const output = kernels.alloc(band);
  const grey = Buffer.allocUnsafe(n);
  try {
    for (let i = 0; i < n; i += band) {
      const m = Math.min(band, n - i);
      kernels.view(input, m * c).set(data.subarray(i * c, (i + m) * c));
      if (!k.grey_of(input, output, m, c, tolerance)) return undefined;
      grey.set(kernels.view(output, m), i);
    }
    return grey;
  } finally {
    kernels.done();
  }
}

/** Where an area average's cells start and end along one axis: [x0, x1) per cell, and the widest cell. */
export interface Spans {
  x0: Int32Array;
  x1: Int32Array;
  widest: number;
}

/**
 * Area average of interleaved 8-bit samples (`w` columns, `c` channels) into cells of `xs` ×
 * `ys`, each rounded after a float32 rounding; no cell may sum past 2^24. A band of output rows
 * at a time, with the source rows they cover.
 */
export function boxAverage(data: Uint8Array, { w, c }: { w: number; c: number }, xs: Spans, ys: Spans): Uint8Array {
  const W = xs.x0.length;
  const H = ys.x0.length;
  const rowBytes = w * c;
  // Output rows [r0, r1) and the source rows they cover, as few bands as fit BAND_BYTES (both
  // ends of the spans only grow from one cell to the next).
  const bandRows = Math.max(ys.widest, Math.floor(BAND_BYTES / rowBytes));
  const bands: [number, number][] = [];
  let mostRows = 0;
  for (let r0 = 0; r0 < H; ) {
    let r1 = r0 + 1;
    while (r1 < H && ys.x1[r1] - ys.x0[r0] <= bandRows) r1++;
    bands.push([r0, r1]);
    mostRows = Math.max(mostRows, r1 - r0);
    r0 = r1;
  }
  const { exports: k, memory } = kernels.take();
  const x0 = kernels.put(xs.x0);
  const x1 = kernels.put(xs.x1);
  const source = kernels.alloc(bandRows * rowBytes);
  const y0 = kernels.alloc(mostRows * 4);
  const y1 = kernels.alloc(mostRows * 4);
  const columns = kernels.alloc(rowBytes * 4);
  const cells = kernels.alloc(mostRows * W * c);
  const out = new Uint8Array(W * H * c);
  try {
    for (const [r0, r1] of bands) {
      const first = ys.x0[r0];
      const last = ys.x1[r1 - 1];
      kernels.view(source, (last - first) * rowBytes).set(data.subarray(first * rowBytes, last * rowBytes));
      const bandY0 = new Int32Array(memory.buffer, y0, r1 - r0);
      const bandY1 = new Int32Array(memory.buffer, y1, r1 - r0);
      for (let r = r0; r < r1; r++) {
        bandY0[r - r0] = ys.x0[r] - first;
        bandY1[r - r0] = ys.x1[r] - first;
      }
      k.box_view(source, w, c, x0, x1, W, y0, y1, r1 - r0, columns, cells);
      out.set(kernels.view(cells, (r1 - r0) * W * c), r0 * W * c);
    }
    return out;
  } finally {
    kernels.done();
  }
}

/**
 * Bilinear magnification of interleaved 8-bit samples (`w` × `h`, both at least 2, `c`
 * channels) to `xi.length` × `H`, at source columns xi + xf; rows are placed here the same way,
 * pixel centres aligned. Rounded after a float32 rounding.
 */
export function bilinearMagnify(data: Uint8Array, { w, h, c }: { w: number; h: number; c: number }, columns: { xi: Int32Array; xf: Float32Array }, H: number): Uint8Array {
  const W = columns.xi.length;
  const { exports: k } = kernels.take();
  const px = kernels.put(data.subarray(0, w * h * c));
  const xi = kernels.put(columns.xi);
  const xf = kernels.put(columns.xf);
  const top = kernels.alloc(W * c * 8);
  const bottom = kernels.alloc(W * c * 8);
  const out = kernels.alloc(W * H * c);
  k.bilinear_view(px, w, h, c, xi, xf, W, H, top, bottom, out);
  const magnified = kernels.bytes(out, W * H * c);
  kernels.done();
  return magnified;
}

/**
 * Rows of 8-bit samples each prefixed with the PNG filter type (0-4) of least sum of absolute
 * residuals (ties to the lower type), and filtered by it. A band of rows at a time, each band
 * after the first given the row above it.
 */
export function filterRows(samples: Uint8Array, { rows, rowBytes, colors }: { rows: number; rowBytes: number; colors: number }): Uint8Array {
  const { exports: k } = kernels.take();
  const band = Math.max(1, Math.floor(BAND_BYTES / rowBytes));
  const input = kernels.alloc(band * rowBytes);
  const above = kernels.alloc(rowBytes);
  const trial = kernels.alloc(rowBytes);
  const best = kernels.alloc(rowBytes);
  const filtered = kernels.alloc(band * (rowBytes + 1));
  const out = new Uint8Array(rows * (rowBytes + 1));
  // The row above the first is zeros, as the PNG filters define it.
  kernels.view(above, rowBytes).fill(0);
  try {
    for (let r = 0; r < rows; r += band) {
      const m = Math.min(band, rows - r);
      kernels.view(input, m * rowBytes).set(samples.subarray(r * rowBytes, (r + m) * rowBytes));
      k.filter_rows(input, m, rowBytes, colors, above, trial, best, filtered);
      out.set(kernels.view(filtered, m * (rowBytes + 1)), r * (rowBytes + 1));
      kernels.view(above, rowBytes).set(samples.subarray((r + m - 1) * rowBytes, (r + m) * rowBytes));
    }
    return out;
  } finally {
    kernels.done();
  }
}
