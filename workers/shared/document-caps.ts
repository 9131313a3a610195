import { LANE_PIXELS, PICTURE_LANES, SMALL_LANE_PIXELS } from './lanes.ts';
import { MEMORY_BUDGET_BYTES, peakBytes } from './memory.ts';

/** Bounds on the pictures one document (DOCX, PPTX, PDF) recompresses; the rest are carried over unchanged. */
export const DOCUMENT_LIMITS = {
  /**
   * Pictures of at most this many pixels (32×32: bullets, icons, spacers) are carried over without
   * being decoded: a re-encode saves a few bytes at most, and a package of thousands of them held a
   * worker for minutes (9,990 pictures of 32×32: 195 s, nothing saved).
   */
  maxTinyPixels: 32 * 32,
  /** Pictures recompressed per document, in document order. */
  maxPictures: 500,
  /**
   * Decoded pixels of the pictures recompressed per document, together (four 100 MP scans, about a
   * minute of work); pictures past it are carried over, as is one whose peak could never fit the
   * node's memory budget (memory.ts).
   */
  maxDocumentPixels: 400e6,
} as const;

/**
 * Which pictures of a document are recompressed (DOCUMENT_LIMITS), and the document's peak memory:
 * the pictures in flight together (lanes.ts: PICTURE_LANES at a time within LANE_PIXELS, a larger one alone,
 * twice as many small ones within SMALL_LANE_PIXELS; one at a time when that could overrun the memory budget).
 */
export class DocumentCaps {
  readonly carried = new Set<string>();
  private count = 0;
  private total = 0;
  /** The largest pictures admitted, PICTURE_LANES of them at most, largest first. */
  private largest: number[] = [];

  full(): boolean {
    return this.count >= DOCUMENT_LIMITS.maxPictures || this.total >= DOCUMENT_LIMITS.maxDocumentPixels;
  }

  carry(name: string): void {
    this.carried.add(name);
  }

  /** Whether the picture `name` of `pixels` (undefined: unknown, counted as a large one) is recompressed. */
  admit(name: string, pixels: number | undefined): boolean {
    const counted = pixels ?? LANE_PIXELS;
    const over = this.full() || this.total + counted > DOCUMENT_LIMITS.maxDocumentPixels || peakBytes(counted) > MEMORY_BUDGET_BYTES;
    if (over || (pixels !== undefined && pixels <= DOCUMENT_LIMITS.maxTinyPixels)) {
      this.carry(name);
      return false;
    }
    this.count++;
    this.total += counted;
    this.largest = [...this.largest, counted].sort((a, b) => b - a).slice(0, PICTURE_LANES);
    return true;
  }

  /** Pictures in flight at once: one when more together could overrun the memory budget. */
  lanes(): number {
    return peakBytes(this.inFlight()) <= MEMORY_BUDGET_BYTES ? PICTURE_LANES : 1;
  }

  peakBytes(): number {
    return peakBytes(this.lanes() > 1 ? this.inFlight() : this.alone());
  }

  /** The most pixels in flight with PICTURE_LANES: the largest pictures together within LANE_PIXELS, or the small lanes' twice as many, none larger than the largest. */
  private inFlight(): number {
    const first = this.largest[0] ?? 0;
    const together = this.largest.reduce((a, b) => a + b, 0);
    return Math.max(first, Math.min(LANE_PIXELS, together), Math.min(SMALL_LANE_PIXELS, 2 * PICTURE_LANES * first));
  }

  /** The most pixels in flight with one lane: the largest picture, or two small ones. */
  private alone(): number {
    const first = this.largest[0] ?? 0;
    return Math.max(first, Math.min(SMALL_LANE_PIXELS, 2 * first));
  }
}
