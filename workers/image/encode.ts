import sharp from 'sharp';
import type { CreateRaw, JpegOptions, OutputInfo, Sharp } from 'sharp';
import { ssimOfLuma, luma, type Pixels } from './ssim.ts';

/**
 * The perceptual target of automatic JPEG quality: the mean luma SSIM (8×8 windows, full
 * resolution, see ssim.ts) the encoded image must reach against the pixels it was made from.
 */
export const JPEG_TARGET_SSIM = 0.98;
/**
 * The proxy scores a little higher than the full image (its tiles miss some of the hardest
 * areas); measured gap on camera photos ≤ 0.0006, so the search aims this much higher.
 */
const PROXY_MARGIN = 0.0007;
/** Quality bounds of the search: below 40 blocking shows whatever SSIM says; above 95 bytes explode for nothing. */
const MIN_QUALITY = 40;
const MAX_QUALITY = 95;
/** Chroma is kept at full resolution from this quality up, where fine colour detail is part of the promise. */
const FULL_CHROMA_FROM = 90;

export interface JpegAutoOptions {
  /** Carry EXIF, ICC and XMP over from the pipeline's input. */
  keepMetadata?: boolean;
  progress?: (percent: number, phase: 'decoding' | 'analyzing' | 'encoding') => void;
}

export interface JpegEncoded {
  data: Buffer;
  quality: number;
  width: number;
  height: number;
}

/** mozjpeg with trellis quantisation and progressive scans, the settings every encode here uses. */
export function jpegOptions(quality: number): JpegOptions {
  return {
    quality,
    mozjpeg: true,
    progressive: true,
    chromaSubsampling: quality >= FULL_CHROMA_FROM ? '4:4:4' : '4:2:0',
  };
}

/**
 * Encodes a pipeline as JPEG at the lowest quality whose SSIM against the pipeline's own pixels
 * reaches JPEG_TARGET_SSIM. The quality is searched on a proxy of about 1 MP made of full-
 * resolution tiles sampled across the image (a downscaled proxy would hide exactly the
 * artefacts the metric must see), then the full image is encoded once.
 * CMYK inputs come out as sRGB (sharp converts through the embedded or a standard CMYK profile);
 * transparency is flattened onto white. With keepMetadata, EXIF (orientation included), ICC and
 * XMP are carried over and the pixels are not rotated.
 */
export async function encodeJpegAuto(img: Sharp, opts: JpegAutoOptions = {}): Promise<JpegEncoded> {
  const progress = opts.progress ?? (() => {});
  const base = img.clone().flatten({ background: '#ffffff' }).toColourspace('srgb');
  progress(10, 'decoding');
  const { data, info } = await base.clone().raw().toBuffer({ resolveWithObject: true });
  progress(30, 'analyzing');
  const quality = await chooseJpegQuality({ data, width: info.width, height: info.height, channels: info.channels });
  progress(55, 'encoding');
  const encoder = opts.keepMetadata ? base.clone().keepMetadata() : sharp(data, { raw: rawOf(info) });
  const out = await encoder.jpeg(jpegOptions(quality)).toBuffer({ resolveWithObject: true });
  return { data: out.data, quality, width: out.info.width, height: out.info.height };
}

function rawOf(info: OutputInfo): CreateRaw {
  return { width: info.width, height: info.height, channels: info.channels as 1 | 2 | 3 | 4 };
}

/** The lowest quality in [MIN_QUALITY, MAX_QUALITY] whose proxy SSIM reaches the target. */
export async function chooseJpegQuality(pixels: Pixels, target = JPEG_TARGET_SSIM + PROXY_MARGIN): Promise<number> {
  const proxy = proxyOf(pixels);
  const reference = luma(proxy);
  const cache = new Map<number, number>();
  const score = async (q: number): Promise<number> => {
    const hit = cache.get(q);
    if (hit !== undefined) return hit;
    const encoded = await sharp(proxy.data, { raw: { width: proxy.width, height: proxy.height, channels: proxy.channels as 1 | 3 } })
      .jpeg(jpegOptions(q))
      .toBuffer();
    const decoded = await sharp(encoded).raw().toBuffer({ resolveWithObject: true });
    const s = ssimOfLuma(reference, luma({ data: decoded.data, width: proxy.width, height: proxy.height, channels: decoded.info.channels }), proxy.width, proxy.height);
    cache.set(q, s);
    return s;
  };
  // Probe two typical qualities, then interpolate on log(1 - SSIM), which is nearly linear in
  // quality, keeping a bracket [lo fails, hi passes]; 3-5 encodes of the proxy in practice.
  let lo = MIN_QUALITY - 1;
  let hi = MAX_QUALITY;
  let sLo = 0;
  let sHi = 1;
  const probe = async (q: number): Promise<void> => {
    const s = await score(q);
    if (s >= target) {
      hi = q;
      sHi = s;
    } else {
      lo = q;
      sLo = s;
    }
  };
  await probe(PROBE_QUALITY);
  let prev = { q: PROBE_QUALITY, s: await score(PROBE_QUALITY) };
  await probe(prev.s >= target ? PROBE_QUALITY - 10 : PROBE_QUALITY + 10);
  while (hi - lo > 1) {
    const a = lo >= MIN_QUALITY ? { q: lo, s: sLo } : prev;
    const b = hi <= MAX_QUALITY && sHi < 1 ? { q: hi, s: sHi } : prev;
    let q: number;
    if (a.q !== b.q) {
      const la = Math.log(1 - a.s);
      const lb = Math.log(1 - b.s);
      q = Math.round(a.q + ((la - Math.log(1 - target)) / (la - lb)) * (b.q - a.q));
    } else {
      q = Math.round((lo + hi) / 2);
    }
    q = Math.min(hi - 1, Math.max(lo + 1, q));
    prev = { q, s: await score(q) };
    await probe(q);
  }
  return Math.max(MIN_QUALITY, hi);
}

const PROBE_QUALITY = 80;

const TILE = 128;
const PROXY_TILES = 64;

/**
 * About 1 MP of the image: a grid of 128×128 full-resolution tiles, aligned to the 16-pixel
 * JPEG MCU grid, spread evenly over the image and laid side by side. Small images are their own proxy.
 */
export function proxyOf(p: Pixels): Pixels {
  const channels = p.channels;
  const cols = Math.floor(p.width / TILE);
  const rows = Math.floor(p.height / TILE);
  if (cols * rows <= PROXY_TILES * 1.25) return p;
  const aspect = p.width / p.height;
  let gx = Math.max(1, Math.min(cols, Math.round(Math.sqrt(PROXY_TILES * aspect))));
  let gy = Math.max(1, Math.min(rows, Math.round(PROXY_TILES / gx)));
  gx = Math.max(1, Math.min(cols, Math.round(PROXY_TILES / gy)));
  const width = gx * TILE;
  const height = gy * TILE;
  const data = new Uint8Array(width * height * channels);
  const rowBytes = TILE * channels;
  for (let ty = 0; ty < gy; ty++) {
    const sy = alignedStart(ty, gy, p.height);
    for (let tx = 0; tx < gx; tx++) {
      const sx = alignedStart(tx, gx, p.width);
      for (let y = 0; y < TILE; y++) {
        const from = ((sy + y) * p.width + sx) * channels;
        const to = ((ty * TILE + y) * width + tx * TILE) * channels;
        data.set(p.data.subarray(from, from + rowBytes), to);
      }
    }
  }
  return { data, width, height, channels };
}

/** Start of tile i of n centred in its share of an edge of `size` pixels, rounded down to 16. */
function alignedStart(i: number, n: number, size: number): number {
  const centre = ((i + 0.5) * size) / n;
  const start = Math.floor((centre - TILE / 2) / 16) * 16;
  return Math.max(0, Math.min(size - TILE, start));
}

export { encodePng, type PngEncoded } from './png-encode.ts';
