// `npx tsx bench/compare-quality.ts A.json B.json`: two runs of `npm run bench quality` side by side
// (bench/results/quality.json of each), to tell what a compressor change did: per kind the median and
// worst SSIMULACRA2, the median bytes and B / A of it, then every file whose bytes or score moved, and how
// far B's reported perceived quality (the search's prediction) is from the measured one.
import { readFile } from 'node:fs/promises';
import { type FileResult, fromResult, toResult } from './equal-quality.ts';
import { markdownTable, median } from './lib.ts';

const [pathA, pathB] = process.argv.slice(2);
if (!pathA || !pathB) {
  console.error('usage: npx tsx bench/compare-quality.ts A.json B.json');
  process.exit(2);
}

/** Reads either shape quality.json has had (records, or the measurements themselves before SSIMULACRA2). */
async function load(path: string): Promise<Map<string, FileResult>> {
  const rows = (JSON.parse(await readFile(path, 'utf8')) as Parameters<typeof fromResult>[0][]).map((r) => toResult(fromResult(r)));
  return new Map(rows.map((r) => [`${r.kind}/${r.file}`, r]));
}

const fixed = (v: number | undefined, digits: number): string => (v === undefined || !Number.isFinite(v) ? '—' : v.toFixed(digits));
const scoresOf = (rows: FileResult[]): number[] => rows.flatMap((r) => r.ourScore ?? []);

function kindRow(kind: string, a: FileResult[], b: FileResult[]): string[] {
  const [sa, sb] = [scoresOf(a), scoresOf(b)];
  const bytes = (rows: FileResult[]) => (rows.length ? median(rows.map((r) => r.ourBytes)) : NaN);
  const [ba, bb] = [bytes(a), bytes(b)];
  return [
    kind,
    `${a.length} → ${b.length}`,
    `${sa.length ? fixed(median(sa), 2) : '—'} → ${sb.length ? fixed(median(sb), 2) : '—'}`,
    `${sa.length ? fixed(Math.min(...sa), 2) : '—'} → ${sb.length ? fixed(Math.min(...sb), 2) : '—'}`,
    `${fixed(ba, 0)} → ${fixed(bb, 0)}`,
    fixed(bb / ba, 3),
  ];
}

function fileRows(a: Map<string, FileResult>, b: Map<string, FileResult>): string[][] {
  const keys = [...new Set([...a.keys(), ...b.keys()])].sort();
  return keys.flatMap((key) => {
    const [x, y] = [a.get(key), b.get(key)];
    if (!x || !y) return [[key, x ? 'only in A' : 'only in B', '', '', '']];
    if (x.ourBytes === y.ourBytes && x.ourScore === y.ourScore) return [];
    const delta = x.ourScore !== undefined && y.ourScore !== undefined ? `${y.ourScore - x.ourScore >= 0 ? '+' : ''}${(y.ourScore - x.ourScore).toFixed(2)}` : '—';
    return [[key, `${x.ourBytes} → ${y.ourBytes}`, fixed(y.ourBytes / x.ourBytes, 3), `${fixed(x.ourScore, 2)} → ${fixed(y.ourScore, 2)}`, delta]];
  });
}

const [a, b] = await Promise.all([load(pathA), load(pathB)]);
const kinds = [...new Set([...a.values(), ...b.values()].map((r) => r.kind))];
const byKind = (m: Map<string, FileResult>, kind: string) => [...m.values()].filter((r) => r.kind === kind);
console.log(`A: ${pathA}\nB: ${pathB}\n`);
console.log(markdownTable(['kind', 'files', 'SSIMULACRA2 median', 'SSIMULACRA2 worst', 'bytes median', 'B / A (median bytes)'], kinds.map((k) => kindRow(k, byKind(a, k), byKind(b, k)))));
const changed = fileRows(a, b);
console.log(`\nFiles that changed (${changed.length}):\n`);
if (changed.length) console.log(markdownTable(['file', 'bytes A → B', 'B / A', 'SSIMULACRA2 A → B', 'Δ score'], changed));

/** How far what the compressor reported (its search's prediction) is from what was measured at full resolution, per kind of B. */
function predictionRows(rows: FileResult[]): string[][] {
  return kinds.flatMap((kind) => {
    const errors = rows.filter((r) => r.kind === kind && r.ourReported !== undefined && r.ourScore !== undefined && r.ourWorstPicture === undefined).map((r) => r.ourReported! - r.ourScore!);
    if (!errors.length) return [];
    const abs = errors.map(Math.abs);
    return [[kind, String(errors.length), fixed(median(errors), 2), fixed(median(abs), 2), fixed(Math.max(...errors), 2), fixed(Math.min(...errors), 2)]];
  });
}
const predictions = predictionRows([...b.values()]);
if (predictions.length) {
  console.log('\nB: reported perceived quality − measured (positive: the search predicted higher than the file scores):\n');
  console.log(markdownTable(['kind', 'files', 'median', 'median |error|', 'largest over', 'largest under'], predictions));
}
