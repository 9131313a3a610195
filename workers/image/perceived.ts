import { proxyOf } from './proxy.ts';
import type { Pixels } from './ssim.ts';
import { ssimulacra2 } from './ssimulacra2.ts';

/**
 * The perceived quality every automatic lossy encode aims at (JPEG quality, palettes, GIF's lossy
 * LZW; images and the pictures of PDF and Office documents alike): SSIMULACRA2 (ssimulacra2.ts)
 * of the output against the pixels it was made from, at full resolution. About 90 is hard to tell
 * apart side by side at 1:1, 70 is high quality. One number for every picture: the search spends
 * bytes where the picture needs them (smooth skies, coloured edges) and saves them where it does
 * not (grain, texture).
 */
export const PERCEIVED_TARGET = 80;

/**
 * A search on a tile proxy (proxy.ts) aims higher than its full-resolution target: the proxy
 * scores a little higher than the whole picture (its tiles miss some of the hardest areas, and at
 * the coarse scales a tile's neighbours are other tiles). Measured on camera photos and scans of
 * 2-12 MP at JPEG qualities 40-94, proxy minus full resolution: −0.7 to +3.4 points, median +0.9;
 * +0.5 to +1.6 around a score of 80, up to +2.0 around 70, up to +3.4 around 57. So the margin is
 * PROXY_MARGIN at the target and above, and grows by MARGIN_SLOPE a point below it: 2.2 at the
 * size rule's floor of 70, where an output must not fall under. A picture that is its own proxy
 * is scored exactly and aims at the target itself.
 */
export const PROXY_MARGIN = 1.2;
const MARGIN_SLOPE = 0.1;

/** The proxy's margin at a score (see PROXY_MARGIN). */
export function proxyMargin(score: number): number {
  return PROXY_MARGIN + MARGIN_SLOPE * Math.max(0, PERCEIVED_TARGET - score);
}

/** What a search on a proxy aims at for a full-resolution target (`exact`: the proxy is the picture). */
export function aimOnProxy(target: number, exact: boolean): number {
  return exact ? target : target + proxyMargin(target);
}

/** The full-resolution score a proxy's score predicts. */
export function fromProxy(score: number, exact: boolean): number {
  return exact ? score : Math.min(100, score - proxyMargin(score));
}

/**
 * SSIMULACRA2 of `distorted` against `original` (same size) as predicted at full resolution from
 * the same tiles of both (proxy.ts): exact for a picture that is its own proxy, the proxy's score
 * less its margin otherwise. Memory and time stay those of about 1 MP at any size.
 */
export function perceivedScore(original: Pixels, distorted: Pixels): number {
  const a = proxyOf(original);
  if (a === original) return ssimulacra2(original, distorted);
  return fromProxy(ssimulacra2(a, proxyOf(distorted)), false);
}
