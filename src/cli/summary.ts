import { basename } from 'node:path';

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

/** An input a directory walk or a glob found and left alone, with the reason. */
export interface Skipped {
  label: string;
  reason: string;
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

/** The terminal width lines are laid out for: the stream's columns, else 80 (a pipe, a file). */
export function columnsOf(stream: { columns?: number }): number {
  return Math.max(40, stream.columns || 80);
}

/** `text` in at most `width` columns, cut in the middle: a path keeps its start and its file name. */
export function fit(text: string, width: number): string {
  if (text.length <= width) return text;
  const keep = width - 1;
  const head = Math.floor(keep / 3);
  return `${text.slice(0, head)}…${text.slice(text.length - (keep - head))}`;
}

/** Words in lines of at most `room` columns; a word longer than a line is cut in the middle, never broken. */
function words(text: string, room: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/).filter(Boolean)) {
    const piece = fit(word, room);
    if (line && line.length + 1 + piece.length > room) {
      lines.push(line);
      line = piece;
    } else line = line ? `${line} ${piece}` : piece;
  }
  return line ? [...lines, line] : lines;
}

const STATUS = 6;
const SIZES = 9;

/** `status` in its column, then `text` wrapped between words under it, every line short of `width`. */
function hang(status: string, text: string, width: number): string {
  return words(text, width - 1 - STATUS)
    .map((line, i) => (i ? ' '.repeat(STATUS) : status.padEnd(STATUS)) + line)
    .join('\n');
}

/**
 * The one line a finished file leaves: status, input (and the output's name when it differs),
 * sizes and saving in fixed columns, the name cut to fit the width. A failure's reason wraps
 * between words under an indent.
 */
export function outcomeLine(o: FileOutcome, width = 80): string {
  if (o.error) return hang('FAIL', `${fit(o.label, width - STATUS - 2)}: ${o.error.code}: ${o.error.detail}`, width);
  const outName = o.output === undefined ? undefined : basename(o.output);
  const name = outName && outName !== basename(o.label) ? `${o.label} → ${outName}` : o.label;
  const sizes = `${formatBytes(o.inputBytes).padStart(SIZES)} → ${formatBytes(o.outputBytes ?? 0).padStart(SIZES)}  ${savedPercent(o.inputBytes, o.outputBytes ?? 0).padStart(6)}`;
  const room = width - 1 - STATUS - sizes.length - 2;
  return `${'ok'.padEnd(STATUS)}${fit(name, room).padEnd(room)}  ${sizes}`;
}

export function skippedLine(s: Skipped, width = 80): string {
  return hang('skip', `${fit(s.label, width - STATUS - 2)}: ${s.reason}`, width);
}

/** The closing line: counts, the bytes of the compressed files, where the outputs went. */
export function totalLine(outcomes: FileOutcome[], skipped: number, outDir: string | null, width = 80): string {
  const done = outcomes.filter((o) => !o.error);
  const failed = outcomes.length - done.length;
  const totalIn = done.reduce((n, o) => n + o.inputBytes, 0);
  const totalOut = done.reduce((n, o) => n + (o.outputBytes ?? 0), 0);
  let text = `${done.length} compressed, ${failed} failed, ${skipped} skipped`;
  if (done.length) text += `; ${formatBytes(totalIn)} → ${formatBytes(totalOut)} (saved ${savedPercent(totalIn, totalOut)})`;
  if (done.length && outDir !== null) text += `; outputs in ${outDir}`;
  return hang('total', text, width);
}
