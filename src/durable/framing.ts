/**
 * The one record framing of every journal: a JSON record with a newline on both sides. A record
 * torn by a crash mid-write becomes an unparseable line of its own — the next append starts on a
 * fresh line — so it is skipped without losing the records around it.
 */
export function frame(record: unknown): string {
  return `\n${JSON.stringify(record)}\n`;
}

export interface Parsed<T> {
  records: T[];
  /** Unparseable complete lines (a torn write followed by later appends). */
  skipped: number;
  /** Text after the last newline: a record still being written, or torn by a crash. */
  rest: string;
}

export function parseFramed<T>(text: string): Parsed<T> {
  const end = text.lastIndexOf('\n');
  const records: T[] = [];
  let skipped = 0;
  for (const line of text.slice(0, end + 1).split('\n')) {
    if (!line) continue;
    try {
      records.push(JSON.parse(line) as T);
    } catch {
      skipped++;
    }
  }
  return { records, skipped, rest: text.slice(end + 1) };
}
