/** The outcome of one file of an offline run. */
export interface FileOutcome {
  label: string;
  inputBytes: number;
  /** Set when the file was compressed. */
  outputBytes?: number;
  output?: string;
  /** Set when it failed: a code and a detail, as the API reports failed jobs. */
  error?: { code: string; detail: string };
}

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let i = 0;
  for (; v >= 1024 && i < units.length - 1; i++) v /= 1024;
  return `${v.toFixed(v < 10 ? 2 : 1)} ${units[i]}`;
}

export function savedPercent(input: number, output: number): string {
  return input > 0 ? `${(((input - output) / input) * 100).toFixed(1)}%` : '0.0%';
}

/** The line a finished file leaves behind (progress line or plain output). */
export function outcomeLine(o: FileOutcome): string {
  if (o.error) return `FAIL ${o.label}: ${o.error.code}: ${o.error.detail}`;
  return `ok   ${o.label} → ${o.output}  ${formatBytes(o.inputBytes)} → ${formatBytes(o.outputBytes!)} (saved ${savedPercent(o.inputBytes, o.outputBytes!)})`;
}

/** The closing table: one row per file (in, out, saved), then the totals of the compressed ones. */
export function summaryTable(outcomes: FileOutcome[]): string {
  const rows: string[][] = [['File', 'In', 'Out', 'Saved', 'Result']];
  let totalIn = 0;
  let totalOut = 0;
  for (const o of outcomes) {
    if (o.error) {
      rows.push([o.label, formatBytes(o.inputBytes), '-', '-', `failed: ${o.error.code}`]);
      continue;
    }
    totalIn += o.inputBytes;
    totalOut += o.outputBytes!;
    rows.push([o.label, formatBytes(o.inputBytes), formatBytes(o.outputBytes!), savedPercent(o.inputBytes, o.outputBytes!), 'ok']);
  }
  const ok = outcomes.filter((o) => !o.error).length;
  const failed = outcomes.length - ok;
  rows.push([`Total: ${ok} compressed, ${failed} failed`, formatBytes(totalIn), formatBytes(totalOut), savedPercent(totalIn, totalOut), failed ? 'FAILED' : 'ok']);
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => r[c].length)));
  const right = new Set([1, 2, 3]);
  const render = (r: string[]) => r.map((cell, c) => (right.has(c) ? cell.padStart(widths[c]) : cell.padEnd(widths[c]))).join('  ').trimEnd();
  const rule = widths.map((w) => '-'.repeat(w)).join('  ');
  return [render(rows[0]), rule, ...rows.slice(1, -1).map(render), rule, render(rows[rows.length - 1])].join('\n');
}
