import { availableParallelism } from 'node:os';

/**
 * How many pictures of one document are worked on at once. A picture's work is mostly libvips
 * and mozjpeg calls, which run on libuv's threads while the job's own thread waits (measured: the
 * job thread idle 60 % of a 600-picture PDF), so a second picture in flight uses the other core
 * instead of leaving it idle. Each picture alternates between the two (an encode there, its score
 * here), and with two in flight both often waited on libuv at once: a third keeps the job's thread
 * and both cores busier on two cores (the same bytes; medians: a PDF of three 12-18 MP photos
 * 4.8 → 3.5 s, a 30-photo PPTX 7.5 → 6.7 s, the mixed batch 33.3-33.4 → 35.4-38.7 jobs/min). The
 * work is the same as one at a time (no speculative encodes), so when every pool thread is busy
 * the extra lanes cost nothing but memory, which the document reserves (document-caps.ts).
 */
export const PICTURE_LANES = availableParallelism() > 1 ? 3 : 1;

/**
 * Decoded pixels that may be in flight at once: a picture over this runs alone, so a document
 * of huge scans holds no more memory than it did one picture at a time.
 */
export const LANE_PIXELS = 48e6;

/**
 * Pictures this small, all in flight together, take up to twice the lanes: their time is call
 * overhead (a codec call's set-up and its hops to libuv's threads and back), not pixels, so with
 * two lanes the job's thread still waited most of it (600 pictures of 48 × 48 in a PDF, the same
 * bytes: 11.0–11.7 → 8.6–8.9 s with four; 6.3 → 5.6 s with six of three lanes).
 */
export const SMALL_LANE_PIXELS = 256 * 1024;

/**
 * Runs `run(i)` for the items 0…count-1, starting them in index order, at most `lanes` at a
 * time and at most LANE_PIXELS of `pixels(i)` together (an item over that runs alone), or, while
 * the items in flight add up to SMALL_LANE_PIXELS at most, twice `lanes`; and never more items
 * ahead of the one the caller takes next than may run, so finished results waiting to be taken
 * stay few. `take(i)` is called in index order and gives item i's result (or its error).
 */
export class Lanes<T> {
  private readonly results = new Map<number, { promise: Promise<T>; resolve: (v: T) => void; reject: (e: unknown) => void }>();
  private next = 0;
  private taken = 0;
  private running = 0;
  private runningPixels = 0;

  constructor(
    private readonly count: number,
    private readonly run: (i: number) => Promise<T>,
    private readonly pixels: (i: number) => number = () => 0,
    private readonly lanes = PICTURE_LANES,
  ) {}

  take(i: number): Promise<T> {
    if (i !== this.taken || i >= this.count) throw new RangeError(`Lanes.take(${i}) out of order (expected ${this.taken} of ${this.count})`);
    this.taken++;
    const result = this.slot(i);
    this.fill();
    // A started item's promise is settled through its own closure; an item not started yet is left for fill.
    if (i < this.next) this.results.delete(i);
    return result.promise;
  }

  private slot(i: number) {
    let s = this.results.get(i);
    if (!s) {
      let resolve!: (v: T) => void;
      let reject!: (e: unknown) => void;
      const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
      // Taken later, in order; until then a failure must not count as unhandled.
      promise.catch(() => {});
      s = { promise, resolve, reject };
      this.results.set(i, s);
    }
    return s;
  }

  private fill(): void {
    while (this.next < this.count && this.next < this.taken + 2 * this.lanes) {
      const weight = this.pixels(this.next);
      if (this.running > 0 && !this.mayStart(weight)) return;
      const i = this.next++;
      const { resolve, reject } = this.slot(i);
      if (i < this.taken) this.results.delete(i);
      this.running++;
      this.runningPixels += weight;
      (async () => this.run(i))()
        .then(resolve, reject)
        .finally(() => {
          this.running--;
          this.runningPixels -= weight;
          this.fill();
        });
    }
  }

  private mayStart(weight: number): boolean {
    const pixels = this.runningPixels + weight;
    if (this.running < this.lanes) return pixels <= LANE_PIXELS;
    return this.running < 2 * this.lanes && pixels <= SMALL_LANE_PIXELS;
  }
}
