import type { Pixels } from './ssim.ts';

const TILE = 128;
/** Tiles of the usual proxy: about 1 MP. A document over its search budget uses fewer (budget.ts). */
export const PROXY_TILES = 64;

/**
 * About 1 MP of the image (`tiles` tiles): a grid of 128×128 full-resolution tiles, aligned to the 16-pixel
 * JPEG MCU grid, spread evenly over the image and laid side by side. Small images are their own proxy.
 */
export function proxyOf(p: Pixels, tiles = PROXY_TILES): Pixels {
  const channels = p.channels;
  if (isOwnProxy(p.width, p.height, tiles)) return p;
  const cols = Math.floor(p.width / TILE);
  const rows = Math.floor(p.height / TILE);
  const aspect = p.width / p.height;
  let gx = Math.max(1, Math.min(cols, Math.round(Math.sqrt(tiles * aspect))));
  let gy = Math.max(1, Math.min(rows, Math.round(tiles / gx)));
  gx = Math.max(1, Math.min(cols, Math.round(tiles / gy)));
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

function isOwnProxy(width: number, height: number, tiles: number): boolean {
  return Math.floor(width / TILE) * Math.floor(height / TILE) <= tiles * 1.25;
}

/** Pixels of the proxy proxyOf makes of a width×height image (about; the grid rounds). */
export function proxyPixels(width: number, height: number, tiles = PROXY_TILES): number {
  return isOwnProxy(width, height, tiles) ? width * height : tiles * TILE * TILE;
}

/** Start of tile i of n centred in its share of an edge of `size` pixels, rounded down to 16. */
function alignedStart(i: number, n: number, size: number): number {
  const centre = ((i + 0.5) * size) / n;
  const start = Math.floor((centre - TILE / 2) / 16) * 16;
  return Math.max(0, Math.min(size - TILE, start));
}
