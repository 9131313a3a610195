// The quality benchmark's tables at equal SSIMULACRA2, beside its luma-SSIM ones: per kind our
// score and bytes, ours / each peer and ours / the strongest peer at our score.
import { type Measured, ratios, strongest } from './equal-quality.ts';
import { markdownTable, median } from './lib.ts';

/** Named in every kind's row that has it: the plain search a JPEG quality search is judged against. */
export const MOZJPEG_S2 = 'mozjpeg SSIMULACRA2 search';

const fixed = (v: number | undefined, digits: number): string => (v === undefined || !Number.isFinite(v) ? '—' : v.toFixed(digits));
const scored = (all: Measured[], kind: string): Measured[] => all.filter((m) => m.kind === kind && m.ours.score !== undefined);
const kindsOf = (all: Measured[]): string[] => [...new Set(all.map((m) => m.kind))];

/** Our bytes / one peer's at our score, over the files where the peer reached it. */
function peerRatios(mine: Measured[], peer: string): number[] {
  return mine.flatMap((m) => ratios(m, 'score').filter((r) => r.peer === peer && r.bound !== 'beyond').map((r) => r.ratio));
}

function worstOf(mine: Measured[]): string {
  if (mine.length === 0) return '—';
  const w = mine.reduce((a, b) => ((b.ours.score ?? 100) < (a.ours.score ?? 100) ? b : a));
  return `${fixed(w.ours.score, 1)} (${w.file})`;
}

/** Documents: the worst single picture over the kind's documents. */
function worstPicture(mine: Measured[]): string {
  const pictures = mine.filter((m) => m.ours.worstScore !== undefined);
  if (pictures.length === 0) return '—';
  const w = pictures.reduce((a, b) => (b.ours.worstScore! < a.ours.worstScore! ? b : a));
  return `${fixed(w.ours.worstScore, 1)} (${w.file})`;
}

function summaryRow(all: Measured[], kind: string, worse: number): (string | number)[] {
  const every = all.filter((m) => m.kind === kind);
  const mine = scored(all, kind);
  const strong = mine.flatMap((m) => strongest(m, 'score') ?? []);
  const bigger = mine.filter((m) => (strongest(m, 'score')?.ratio ?? 0) > worse);
  const unmatched = mine.filter((m) => strongest(m, 'score') === undefined);
  const moz = peerRatios(mine, MOZJPEG_S2);
  return [
    kind,
    mine.length === every.length ? mine.length : `${mine.length} of ${every.length}`,
    mine.length ? fixed(median(mine.map((m) => m.ours.score!)), 1) : '—',
    worstOf(mine),
    worstPicture(mine),
    Math.round(median(every.map((m) => m.ours.bytes))).toLocaleString('en-US'),
    moz.length ? fixed(median(moz), 3) : '—',
    strong.length ? fixed(median(strong.map((r) => r.ratio)), 3) : '—',
    `${bigger.length}${bigger.length ? ` (${bigger.map((m) => m.file).join(', ')})` : ''}`,
    unmatched.map((m) => m.file).join(', ') || '—',
  ];
}

/** Per kind: our SSIMULACRA2 and bytes, and ours / mozjpeg and ours / the strongest peer at equal SSIMULACRA2. */
export function scoreSummaryTable(all: Measured[], worse: number): string {
  return markdownTable(
    [
      'kind',
      'files scored',
      'our SSIMULACRA2 (median)',
      'worst file',
      'worst picture (documents)',
      'our bytes (median)',
      `ours / ${MOZJPEG_S2} at equal SSIMULACRA2 (median)`,
      'ours / strongest peer at equal SSIMULACRA2 (median)',
      `files > ${Math.round((worse - 1) * 100)} % bigger`,
      'no peer reached our SSIMULACRA2',
    ],
    kindsOf(all).map((kind) => summaryRow(all, kind, worse)),
  );
}

/** Per kind and peer: ours / that peer at equal SSIMULACRA2, and the files it never reached our score on. */
export function scorePeerTable(all: Measured[]): string {
  const rows = kindsOf(all).flatMap((kind) => {
    const mine = scored(all, kind);
    return [...new Set(mine.flatMap((m) => Object.keys(m.peers)))].map((peer) => {
      const r = peerRatios(mine, peer);
      const short = mine.filter((m) => ratios(m, 'score').some((x) => x.peer === peer && x.bound === 'beyond'));
      return [kind, peer, r.length, r.length ? fixed(median(r), 3) : '—', short.length ? `${short.length} (${short.map((m) => m.file).join(', ')})` : '0'];
    });
  });
  return markdownTable(['kind', 'peer', 'files compared', 'ours / peer at equal SSIMULACRA2 (median)', 'files the peer did not reach'], rows);
}

const mark = (bound: string | undefined): string => (bound === 'beyond' ? ' ≥' : bound === 'below' ? ' ≤' : '');

/** One kind's files: our score (and worst picture) and ours / each peer at it. */
export function scoreDetailTable(all: Measured[], kind: string): string {
  const mine = all.filter((m) => m.kind === kind);
  const peers = [...new Set(mine.flatMap((m) => Object.keys(m.peers)))];
  return markdownTable(
    ['file', 'ours bytes', 'ours SSIMULACRA2', 'worst picture', ...peers.map((p) => `ours / ${p}`)],
    mine.map((m) => {
      const r = ratios(m, 'score');
      const cell = (p: string) => {
        const x = r.find((y) => y.peer === p);
        return x ? `${x.ratio.toFixed(3)}${mark(x.bound)}` : '—';
      };
      return [m.file, m.ours.bytes, fixed(m.ours.score, 2), fixed(m.ours.worstScore, 2), ...peers.map(cell)];
    }),
  );
}

/** Files whose SSIMULACRA2 was left out (a picture over the metric's pixel limit, or the metric failed on it), if any. */
export function unscoredNote(all: Measured[], maxPixels: number): string {
  const left = all.filter((m) => m.ours.score === undefined);
  const files = left.map((m) => `${m.kind}/${m.file}`).join(', ');
  return left.length ? `SSIMULACRA2 left out (a picture over ${maxPixels / 1e6} MP, or the metric failed on it: see the run's log; luma SSIM only): ${files}.` : '';
}
