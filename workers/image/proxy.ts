import type { Pixels } from './ssim.ts';

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
