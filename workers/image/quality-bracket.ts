/**
 * The probes of a JPEG quality search (the image compressors' and the PDF pictures'): the
 * bracket [lo fails, hi passes] they close and where the next probe goes.
 */

/**
 * Quality bounds of every JPEG search (images, PDF and Office pictures): below 40 blocking shows
 * whatever a metric says (or when a reader zooms into a page); above 95 bytes explode for nothing.
 */
export const MIN_QUALITY = 40;
export const MAX_QUALITY = 95;

/** The first probe of a search with nothing known, and how far its second goes (toward the target). */
export const PROBE_QUALITY = 80;
export const PROBE_STEP = 5;
/** Largest move of one extrapolated probe. */
const MAX_JUMP = 15;
/** A flat stretch's distance from the aim, in log(100 - score), beyond which its level is taken to hold to the end of the range: twice or half the aim's distance from lossless. */
const FAR_FROM_AIM = Math.LN2;

/**
 * Whether a quality search bracketed by [lo fails, hi passes] may stop, with `left` probes of its
 * budget left: when the bracket is closed, or when the budget is spent and some quality below
 * MAX_QUALITY has passed (MAX_QUALITY itself is only assumed to).
 */
export function searchDone(lo: number, hi: number, left: number): boolean {
  return hi - lo <= 1 || (left <= 0 && hi < MAX_QUALITY);
}

/** The probes of one quality search: the bracket [lo fails, hi passes] they close, within a budget of probes. */
export class Bracket {
  lo = MIN_QUALITY - 1;
  hi = MAX_QUALITY;
  readonly seen: Scored[] = [];
  /** How many probes in a row before the last landed on the same side of the aim as it. */
  sameSide = 0;
  private left: number;

  constructor(
    private readonly score: (q: number) => Promise<number>,
    readonly aim: number,
    probes: number,
  ) {
    this.left = probes;
  }

  async probe(q: number): Promise<void> {
    this.left--;
    const s = await this.score(q);
    const { seen, aim } = this;
    seen.push({ q, s });
    const pass = s >= aim;
    this.sameSide = seen.length > 1 && pass === seen[seen.length - 2].s >= aim ? this.sameSide + 1 : 0;
    if (pass) this.hi = q;
    else this.lo = q;
  }

  get hasLeft(): boolean {
    return this.left > 0;
  }

  get done(): boolean {
    return searchDone(this.lo, this.hi, this.left);
  }
}

/**
 * The next probe along the secant of log(100 - score), which is nearly linear in quality:
 * through the bracket [lo fails, hi passes] once both ends are measured, through the two
 * measurements nearest the target before that. A bracket end that moves twice in a row pulls
 * the next probe halfway to the middle (the Illinois safeguard against creeping one quality at
 * a time along a curved stretch). A secant along which the score does not rise with quality says
 * nothing of where the target is; that happens only while every probe is on one side of the aim
 * (a failing and a passing end always rise). Far from the aim (FAR_FROM_AIM) such a stretch is
 * flat — a flat-coloured graphic scoring 100 at every quality, an 8×8 grey picture 95.7-96.3 — and
 * the next probe is the end of the range on the far side, MIN_QUALITY (or MAX_QUALITY - 1,
 * the last one a search probes), the likeliest answer: halving toward it took 5-7 more probes
 * (a flat graphic: 80, 75, 60, 50, 46, 45, 42, 41, 40). Near the aim it is noise (a q100 export
 * scoring 82.3 at q80 and 84.0 at q75, aim 81.2), and the end of the range a poor guess (that
 * export took 3 more probes to a 5 % larger file): the bracket is halved, clamped to the last
 * probe ± MAX_JUMP so that it still narrows in a few probes. Clamping such a secant to the
 * bracket's edge crept one quality a probe: 32 probes on a 0.33 MP grey scan.
 */
export function secantProbe({ seen, aim, lo, hi, sameSide }: Bracket): number {
  const goal = logLoss(aim);
  const ends = seen.filter((p) => p.q === lo || p.q === hi);
  const [a, b] = ends.length === 2 ? ends : [...seen].sort((x, y) => Math.abs(logLoss(x.s) - goal) - Math.abs(logLoss(y.s) - goal));
  const la = logLoss(a.s);
  const lb = logLoss(b.s);
  const rising = (lb - la) * (b.q - a.q) < 0;
  if (!rising && Math.abs(la - goal) >= FAR_FROM_AIM) return a.s >= aim ? MIN_QUALITY : MAX_QUALITY - 1;
  let q = rising ? Math.round(a.q + ((la - goal) / (la - lb)) * (b.q - a.q)) : Math.round((lo + hi) / 2);
  if (rising && ends.length === 2 && sameSide >= 1) q = Math.round((q + (lo + hi) / 2) / 2);
  const last = seen[seen.length - 1].q;
  return Math.min(hi - 1, Math.max(lo + 1, Math.min(q, last + MAX_JUMP), last - MAX_JUMP));
}

/** A probe's quality and the proxy score it reached. */
export interface Scored {
  q: number;
  s: number;
}

export function logLoss(s: number): number {
  return Math.log(Math.max(0.01, 100 - s));
}

/** log(100 - score) at quality q along a search's probes: linear between the two nearest on either side, else through the two nearest. */
export function logLossAt(points: Scored[], q: number): number {
  const sorted = [...points].sort((a, b) => a.q - b.q);
  const exact = sorted.find((p) => p.q === q);
  if (exact) return logLoss(exact.s);
  if (sorted.length < 2) return logLoss(sorted[0].s);
  // The first point above q closes the segment; beyond either end, the end's segment extends.
  const above = sorted.findIndex((p) => p.q > q);
  const i = above === -1 ? sorted.length - 1 : Math.max(1, above);
  const [a, b] = [sorted[i - 1], sorted[i]];
  return logLoss(a.s) + ((logLoss(b.s) - logLoss(a.s)) * (q - a.q)) / (b.q - a.q);
}
