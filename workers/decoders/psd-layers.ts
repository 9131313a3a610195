import { getLayerImageData, getLayerMaskImageData, readPsd, type BlendMode, type Layer, type PixelData } from 'ag-psd';
import { JobError } from '../contract.ts';
import { checkPixelBudget } from '../image/decode-policy.ts';

/**
 * The picture of a PSD saved without "Maximize Compatibility": Photoshop then stores a blank
 * (white) merged image and says so in its version-info resource, and a reader has to composite
 * the layers itself, as ImageMagick does. Composited here: visible layers and groups bottom to
 * top, layer opacity and fill opacity, layer masks, clipping masks, isolated and pass-through
 * groups, and the separable blend modes (normal, multiply, screen, overlay, soft/hard/vivid/
 * linear/pin light, hard mix, darken, lighten, colour dodge/burn, linear dodge/burn, difference,
 * exclusion, subtract, divide). Not rendered: layer effects (strokes, shadows, overlays),
 * adjustment layers and the non-separable modes (hue, saturation, colour, luminosity, darker and
 * lighter colour, dissolve: drawn as normal). Reads RGB, greyscale and indexed documents (ag-psd's).
 *
 * Layers are decoded one at a time (ag-psd's raw-data mode), each checked against the pixel
 * budget first (a layer's declared bounds may exceed the document's), and all of them together
 * against LAYER_WORK budgets: a file of many huge, nearly empty layers is refused, not ground through.
 */

/** Straight-alpha RGBA, 16 bits per sample, the document's size. */
export interface Composite {
  data: Uint16Array;
  width: number;
  height: number;
}

const ONE = 65535;
/** Memory ag-psd may use for one decoded layer bitmap. */
const LAYER_MEMORY_LIMIT = 1024 * 1024 * 1024;
/** All layer, mask and group pixels one composite may touch, in multiples of the pixel budget. */
const LAYER_WORK = 8;

export function compositeLayers(bytes: Buffer, maxPixels: number): Composite {
  const psd = readPsd(bytes, { useRawData: true, useRawThumbnail: true, skipLinkedFilesData: true, totalMemoryLimit: LAYER_MEMORY_LIMIT });
  if (!psd.children?.length) throw new JobError('image.decode_failed', 'The PSD has neither a merged image nor layers.');
  const canvas = new Uint16Array(psd.width * psd.height * 4);
  let work = 0;
  const budget = (width: number, height: number) => {
    checkPixelBudget(width, height, maxPixels);
    work += width * height;
    if (work > LAYER_WORK * maxPixels) throw new JobError('image.too_many_pixels', `The PSD's layers add up to more than ${(LAYER_WORK * maxPixels) / 1e6} megapixels to composite.`);
  };
  drawLayers(psd.children, { data: canvas, width: psd.width, height: psd.height }, budget);
  return { data: canvas, width: psd.width, height: psd.height };
}

type Budget = (width: number, height: number) => void;

/** A bitmap placed on the canvas: its bounds in document coordinates and its samples' full scale. */
interface Placed {
  data: ArrayLike<number>;
  left: number;
  top: number;
  width: number;
  height: number;
  max: number;
}

interface Mask extends Placed {
  /** Value outside the mask's bounds, 0..1. */
  outside: number;
}

function drawLayers(layers: Layer[], target: Composite, budget: Budget): void {
  let clipBase: Float32Array | null = null;
  for (let i = 0; i < layers.length; i++) {
    const layer = layers[i];
    const clipped = !!layer.clipping && !layer.children;
    const nextClipped = !!layers[i + 1]?.clipping;
    if (!clipped) clipBase = null;
    if (layer.hidden) continue;
    if (clipped && !clipBase) continue;
    const opacity = (layer.opacity ?? 1) * (layer.fillOpacity ?? 1);
    const mask = maskOf(layer, budget);
    if (layer.children) {
      const passThrough = layer.blendMode === 'pass through';
      budget(target.width, target.height);
      const group = passThrough ? Uint16Array.from(target.data) : new Uint16Array(target.data.length);
      drawLayers(layer.children, { ...target, data: group }, budget);
      const placed: Placed = { data: group, left: 0, top: 0, width: target.width, height: target.height, max: ONE };
      if (passThrough) mix(placed, target, layer.opacity ?? 1, mask);
      else blend(placed, target, { mode: layer.blendMode ?? 'normal', opacity: layer.opacity ?? 1, mask, clip: null, keep: null });
      continue;
    }
    const pixels = pixelsOf(layer, budget);
    if (!pixels) continue;
    const keep = nextClipped ? new Float32Array(target.width * target.height) : null;
    blend(pixels, target, { mode: layer.blendMode ?? 'normal', opacity, mask, clip: clipped ? clipBase : null, keep });
    if (keep) clipBase = keep;
  }
}

function pixelsOf(layer: Layer, budget: Budget): Placed | null {
  const width = (layer.right ?? 0) - (layer.left ?? 0);
  const height = (layer.bottom ?? 0) - (layer.top ?? 0);
  if (width <= 0 || height <= 0) return null;
  budget(width, height);
  const img = getLayerImageData(layer);
  if (!img) return null;
  return { data: img.data, left: layer.left ?? 0, top: layer.top ?? 0, width, height, max: fullScale(img) };
}

function maskOf(layer: Layer, budget: Budget): Mask | null {
  const m = layer.mask;
  if (!m || m.disabled) return null;
  const width = (m.right ?? 0) - (m.left ?? 0);
  const height = (m.bottom ?? 0) - (m.top ?? 0);
  const outside = (m.defaultColor ?? 0) / 255;
  if (width <= 0 || height <= 0) return outside >= 1 ? null : { data: [], left: 0, top: 0, width: 0, height: 0, max: 1, outside };
  budget(width, height);
  const img = getLayerMaskImageData(layer);
  if (!img) return null;
  return { data: img.data, left: m.left ?? 0, top: m.top ?? 0, width, height, max: fullScale(img), outside };
}

function fullScale(img: PixelData): number {
  return img.data instanceof Uint16Array ? ONE : img.data instanceof Float32Array ? 1 : 255;
}

function maskAt(m: Mask | null, x: number, y: number): number {
  if (!m) return 1;
  const mx = x - m.left;
  const my = y - m.top;
  if (mx < 0 || my < 0 || mx >= m.width || my >= m.height) return m.outside;
  return m.data[(my * m.width + mx) * 4] / m.max;
}

/** How a layer is drawn: its blend mode, opacity and mask, the alpha it is clipped to, and where its own alpha is kept. */
interface Blending {
  mode: BlendMode;
  opacity: number;
  mask: Mask | null;
  clip: Float32Array | null;
  keep: Float32Array | null;
}

/**
 * Source-over compositing of `src` onto `dst` with a blend mode (W3C compositing: the blended
 * colour weighs in where the backdrop is opaque). `clip` limits the layer to its clipping base's
 * alpha; `keep` receives this layer's own alpha for the layers clipped to it.
 */
function blend(src: Placed, dst: Composite, { mode, opacity, mask, clip, keep }: Blending): void {
  const fn = BLEND[mode] ?? null;
  const x0 = Math.max(0, src.left);
  const y0 = Math.max(0, src.top);
  const x1 = Math.min(dst.width, src.left + src.width);
  const y1 = Math.min(dst.height, src.top + src.height);
  const d = dst.data;
  const s = src.data;
  for (let y = y0; y < y1; y++) {
    for (let x = x0; x < x1; x++) {
      const si = ((y - src.top) * src.width + (x - src.left)) * 4;
      const p = y * dst.width + x;
      const own = (s[si + 3] / src.max) * maskAt(mask, x, y);
      if (keep) keep[p] = own;
      const a = own * opacity * (clip ? clip[p] : 1);
      if (a <= 0) continue;
      const di = p * 4;
      const ab = d[di + 3] / ONE;
      const ao = a + ab * (1 - a);
      for (let c = 0; c < 3; c++) {
        const cs = s[si + c] / src.max;
        const cb = d[di + c] / ONE;
        const mixed = fn && ab > 0 ? (1 - ab) * cs + ab * fn(cb, cs) : cs;
        d[di + c] = Math.round(((a * mixed + ab * (1 - a) * cb) / ao) * ONE);
      }
      d[di + 3] = Math.round(ao * ONE);
    }
  }
}

/** A pass-through group: its result replaces the backdrop in proportion to the group's opacity and mask. */
function mix(src: Placed, dst: Composite, opacity: number, mask: Mask | null): void {
  const d = dst.data;
  const s = src.data;
  for (let y = 0; y < dst.height; y++) {
    for (let x = 0; x < dst.width; x++) {
      const t = opacity * maskAt(mask, x, y);
      if (t >= 1) {
        for (let c = 0, i = (y * dst.width + x) * 4; c < 4; c++) d[i + c] = s[i + c];
        continue;
      }
      for (let c = 0, i = (y * dst.width + x) * 4; c < 4; c++) d[i + c] = Math.round(d[i + c] + (s[i + c] - d[i + c]) * t);
    }
  }
}

type Separable = (cb: number, cs: number) => number;

const screen: Separable = (b, s) => b + s - b * s;
const multiply: Separable = (b, s) => b * s;
const dodge: Separable = (b, s) => (b <= 0 ? 0 : s >= 1 ? 1 : Math.min(1, b / (1 - s)));
const burn: Separable = (b, s) => (b >= 1 ? 1 : s <= 0 ? 0 : 1 - Math.min(1, (1 - b) / s));
const hardLight: Separable = (b, s) => (s <= 0.5 ? multiply(b, 2 * s) : screen(b, 2 * s - 1));
const clamp = (v: number) => Math.min(1, Math.max(0, v));

/** Photoshop's separable blend modes; the modes missing here are drawn as normal. */
const BLEND: Partial<Record<BlendMode, Separable>> = {
  multiply,
  screen,
  overlay: (b, s) => hardLight(s, b),
  darken: Math.min,
  lighten: Math.max,
  'color dodge': dodge,
  'color burn': burn,
  'hard light': hardLight,
  'soft light': (b, s) => {
    if (s <= 0.5) return b - (1 - 2 * s) * b * (1 - b);
    const d = b <= 0.25 ? ((16 * b - 12) * b + 4) * b : Math.sqrt(b);
    return b + (2 * s - 1) * (d - b);
  },
  'vivid light': (b, s) => (s <= 0.5 ? burn(b, 2 * s) : dodge(b, 2 * s - 1)),
  'linear light': (b, s) => clamp(b + 2 * s - 1),
  'pin light': (b, s) => (s <= 0.5 ? Math.min(b, 2 * s) : Math.max(b, 2 * s - 1)),
  'hard mix': (b, s) => (b + s >= 1 ? 1 : 0),
  difference: (b, s) => Math.abs(b - s),
  exclusion: (b, s) => b + s - 2 * b * s,
  'linear burn': (b, s) => clamp(b + s - 1),
  'linear dodge': (b, s) => clamp(b + s),
  subtract: (b, s) => clamp(b - s),
  divide: (b, s) => (s <= 0 ? (b > 0 ? 1 : 0) : clamp(b / s)),
};
