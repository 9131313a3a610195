import { createWriteStream } from 'node:fs';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import yazl from 'yazl';
import type { ResizeOptions } from '../../src/catalog/index.ts';
import type { CompressContext } from '../contract.ts';
import type { Analysis } from './analyze.ts';
import { LIMITS } from './limits.ts';
import type { BudgetedPicture } from '../image/budget.ts';
import { PREDICTED_SEARCH_MS, predictedEncodeMs } from '../image/encode.ts';
import { recompressImage } from './media.ts';
import { LANE_PIXELS, Lanes } from '../shared/lanes.ts';
import { estimatedProgress } from '../shared/progress.ts';
import type { PicturePlan } from './plan.ts';
import { damaged, openEntryStream, readEntry, type OpenPackage, type PackageEntry } from './zip-read.ts';

/** Recompression costs far more per byte than copying; progress is weighted accordingly. */
const IMAGE_WEIGHT = 8;
const PROGRESS_FROM = 10;
const PROGRESS_TO = 95;

/**
 * Writes the package again: `[Content_Types].xml` first, then every other entry in its original
 * order under its original name. Image parts are recompressed a few at a time (lanes.ts), their
 * quality searches within the document budget of `budget`; every other part is streamed through
 * unchanged. Each entry is produced when yazl reaches it, image parts at most a lane ahead, so a
 * few parts at most are in memory. Every entry is deflated at level 9 (no stored entries: a stored entry with a
 * data descriptor is unreadable to some streaming zip readers).
 */
export async function writePackage(pkg: OpenPackage, analysis: Analysis, { outPath, resize, budget, ctx }: WriteOptions): Promise<{ perceived?: number }> {
  const order = [analysis.contentTypesEntry, ...pkg.entries.filter((e) => e !== analysis.contentTypesEntry)];
  const isImage = (e: PackageEntry): boolean => analysis.images.has(e.name.toLowerCase()) && e.uncompressedSize <= LIMITS.maxMediaBytes && !budget.carried.has(e.name);
  const weight = (e: PackageEntry): number => 1 + e.uncompressedSize * (isImage(e) ? IMAGE_WEIGHT : 1);
  const total = order.reduce((sum, e) => sum + weight(e), 0);
  let done = 0;
  const pictures = new PicturesAhead(pkg, analysis, order.filter(isImage), { resize, budget });
  const at = (d: number) => PROGRESS_FROM + ((PROGRESS_TO - PROGRESS_FROM) * d) / total;
  const produce = async (entry: PackageEntry, failed: (err: unknown) => void): Promise<Readable> => {
    ctx.signal.throwIfAborted();
    const image = isImage(entry);
    const from = at(done);
    ctx.progress(from, image ? 'images' : 'writing');
    done += weight(entry);
    if (!image) {
      const stream = await openEntryStream(pkg.zip, entry);
      stream.on('error', (err) => failed(damaged(err, entry.name)));
      return stream;
    }
    // A picture moves by its predicted time while it is awaited (it may be done already: two run ahead).
    const predictedMs = PREDICTED_SEARCH_MS + predictedEncodeMs(budget.pixels.get(entry.name) ?? 0);
    const data = await estimatedProgress(() => pictures.take(entry), { from, to: at(done), predictedMs }, (p, toward) => ctx.progress(p, 'images', toward));
    return Readable.from([data]);
  };
  await writeZip(order, produce, outPath);
  return { perceived: pictures.perceived };
}

/** Where and how writePackage writes: the output path, the resize asked for, the document's picture plan, the job's context. */
export interface WriteOptions {
  outPath: string;
  resize: ResizeOptions | undefined;
  budget: PicturePlan;
  ctx: CompressContext;
}

/** The package's pictures recompressed a few at a time ahead of the writer (lanes.ts), each taken in entry order. */
class PicturesAhead {
  /** The lowest perceived quality of the pictures encoded lossily. */
  perceived: number | undefined;
  private readonly index: Map<PackageEntry, number>;
  private readonly lanes: Lanes<Buffer>;

  constructor(
    private readonly pkg: OpenPackage,
    private readonly analysis: Analysis,
    images: PackageEntry[],
    private readonly plan: { resize: ResizeOptions | undefined; budget: PicturePlan },
  ) {
    const { budget } = plan;
    this.index = new Map(images.map((e, k) => [e, k]));
    this.lanes = new Lanes(
      images.length,
      async (k): Promise<Buffer> => {
        const entry = images[k];
        // A planned picture counts as done however it ends (a part that cannot be read included),
        // so the pictures whose searches wait for it never wait for ever.
        const planned = budget.pictures.get(entry.name);
        const recompress = (picture?: BudgetedPicture) => this.recompress(entry, picture);
        return planned === undefined ? recompress() : budget.classes.run(planned, recompress);
      },
      // A picture whose header did not read counts as a large one: it runs alone.
      (k) => budget.pixels.get(images[k].name) ?? LANE_PIXELS,
      budget.lanes,
    );
  }

  take(entry: PackageEntry): Promise<Buffer> {
    return this.lanes.take(this.index.get(entry)!);
  }

  private async recompress(entry: PackageEntry, picture?: BudgetedPicture): Promise<Buffer> {
    const need = this.analysis.images.get(entry.name.toLowerCase()) ?? null;
    const original = await readEntry(this.pkg.zip, entry);
    const smaller = await recompressImage(original, need, this.plan.resize, picture);
    if (smaller?.score !== undefined) this.perceived = Math.min(this.perceived ?? 100, smaller.score);
    return smaller?.data ?? original;
  }
}

/**
 * The entries as a zip at `outPath`, each produced when yazl reaches it. A failure reported to
 * `produce`'s callback (a damaged source entry) fails the whole write; the half-written output
 * is closed so the caller can remove it.
 */
async function writeZip(order: PackageEntry[], produce: (entry: PackageEntry, failed: (err: unknown) => void) => Promise<Readable>, outPath: string): Promise<void> {
  const zip = new yazl.ZipFile();
  let failed: (err: unknown) => void = () => {};
  const failure = new Promise<never>((_, reject) => (failed = reject));
  failure.catch(() => {});
  zip.on('error', (err) => failed(err));
  for (const entry of order) {
    const options = { mtime: entry.mtime, forceDosTimestamp: true };
    if (entry.isDirectory) {
      zip.addEmptyDirectory(entry.name, options);
      continue;
    }
    zip.addReadStreamLazy(entry.name, { ...options, compressionLevel: 9 }, (cb) => {
      produce(entry, failed).then(
        (stream) => cb(null, stream),
        (err) => cb(err, Readable.from([])),
      );
    });
  }
  zip.end();
  const writing = pipeline(zip.outputStream, createWriteStream(outPath));
  try {
    await Promise.race([writing, failure]);
  } catch (err) {
    // Close the half-written output so the caller can remove it.
    (zip.outputStream as Readable).destroy();
    await writing.catch(() => {});
    throw err;
  }
}
