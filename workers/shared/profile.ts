import { AsyncLocalStorage } from 'node:async_hooks';
import type { JpegSetting } from '../image/encode.ts';

/**
 * Where a job's time goes (issue 40's phase profile, read by `npm run bench speed`). `search`
 * is a quality search's whole wall time and `score` the part of it spent in the perceptual
 * metric (synchronous, on the job's thread); the rest of `search` is its probes' encodes and
 * decodes. `encode` is the output's encode, `fit` a size rule's work: its calibrating encodes and any further full-size encode.
 * A document's pictures run a few at a time, so its phases may add up to more than its wall time.
 */
export type Phase = 'read' | 'decode' | 'normalise' | 'analyse' | 'search' | 'score' | 'encode' | 'fit' | 'write';

export interface Profile {
  ms: Partial<Record<Phase, number>>;
  /** The setting of a JPEG output's encode (the physical limit re-encodes with it). */
  setting?: JpegSetting;
  /** The lossy LZW threshold of a GIF output. */
  gifThreshold?: number;
  /** A JPEG search's probe encodes and the megapixels they encoded. */
  probes: number;
  probePixels: number;
}

const current = new AsyncLocalStorage<Profile>();

/** Runs a job with its phases recorded. Outside such a run the markers below cost one lookup. */
export async function profiled<T>(job: () => Promise<T>): Promise<{ result: T; profile: Profile }> {
  const profile: Profile = { ms: {}, probes: 0, probePixels: 0 };
  const result = await current.run(profile, job);
  return { result, profile };
}

function add(name: Phase, since: number): void {
  const p = current.getStore();
  if (p) p.ms[name] = (p.ms[name] ?? 0) + performance.now() - since;
}

/** Counts `work`'s wall time to a phase of the running job's profile, if one is recorded. */
export async function phase<T>(name: Phase, work: () => Promise<T>): Promise<T> {
  if (!current.getStore()) return work();
  const t = performance.now();
  try {
    return await work();
  } finally {
    add(name, t);
  }
}

/** phase() for synchronous work. */
export function phaseSync<T>(name: Phase, work: () => T): T {
  if (!current.getStore()) return work();
  const t = performance.now();
  try {
    return work();
  } finally {
    add(name, t);
  }
}

/** Notes the setting of a JPEG output's encode. */
export function noteSetting(setting: JpegSetting): void {
  const p = current.getStore();
  if (p) p.setting = { quality: setting.quality, table: setting.table, chroma: setting.chroma };
}

/** Notes the lossy LZW threshold of a GIF output. */
export function noteGifThreshold(threshold: number): void {
  const p = current.getStore();
  if (p) p.gifThreshold = threshold;
}

/** Counts one probe encode of a JPEG search. */
export function noteProbe(pixels: number): void {
  const p = current.getStore();
  if (p) {
    p.probes++;
    p.probePixels += pixels;
  }
}
