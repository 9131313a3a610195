const UNITS = ['bytes', 'KB', 'MB', 'GB'];

/** Human size with binary steps (1 KB = 1024 bytes), as file managers show it. */
export function formatBytes(n: number): string {
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  if (unit === 0) return `${n} ${n === 1 ? 'byte' : 'bytes'}`;
  // "1 GB", not "1.00 GB": a limit reads as the round number it was configured as.
  return `${Number(value.toFixed(value < 10 ? 2 : value < 100 ? 1 : 0))} ${UNITS[unit]}`;
}

export function savingsText(before: number, after: number): string {
  if (before <= 0) return '';
  const pct = (1 - after / before) * 100;
  if (Math.abs(pct) < 0.05) return 'no change';
  return pct > 0 ? `${pct.toFixed(1)}% smaller` : `${(-pct).toFixed(1)}% larger`;
}

/** A job's `metrics.perceivedQuality` with the landmarks of its scale, for people who do not know SSIMULACRA2. */
export function qualityText(score: number): string {
  return `SSIMULACRA2 ${score} · hard to tell apart ≥ 90, high quality ≥ 70`;
}

/** "38.2% saved" style share of bytes saved, for totals. */
export function percentSaved(before: number, after: number): string {
  if (before <= 0) return '';
  const pct = (1 - after / before) * 100;
  return pct >= 0 ? `${pct.toFixed(1)}% saved` : `${(-pct).toFixed(1)}% larger`;
}

export function extensionOf(name: string): string {
  const dot = name.lastIndexOf('.');
  return dot > 0 ? name.slice(dot + 1).toLowerCase() : '';
}

/** The file name a `Content-Disposition` header gives (RFC 6266 `filename*` preferred). */
export function fileNameFromDisposition(header: string | null): string | null {
  if (!header) return null;
  const star = /filename\*\s*=\s*UTF-8''([^;]+)/i.exec(header);
  if (star) {
    try {
      return decodeURIComponent(star[1].trim());
    } catch {
      // fall through to the plain form
    }
  }
  const plain = /filename\s*=\s*"([^"]*)"|filename\s*=\s*([^;]+)/i.exec(header);
  return plain ? (plain[1] ?? plain[2]).trim() : null;
}
