import type { ByteRange } from '../jobs/backend.ts';

/** What a representation is validated by: a strong entity tag (when known) and its last change. */
export interface Validators {
  etag: string | null;
  lastModified: Date;
}

/** What a GET (or HEAD) asked for once its validators and any Range are weighed (RFC 9110 §13.2.2). */
export type Selection = { kind: 'not-modified' } | { kind: 'full' } | { kind: 'part'; range: ByteRange } | { kind: 'unsatisfiable' };

const ENTITY_TAG = /(W\/)?"[^"]*"/g;

const opaque = (tag: string) => tag.replace(/^W\//, '');

/** `If-None-Match` uses the weak comparison: a weak tag of the same bytes matches too. */
export function noneMatchHits(header: string | undefined, etag: string | null): boolean {
  if (header === undefined || etag === null) return false;
  if (header.trim() === '*') return true;
  return [...header.matchAll(ENTITY_TAG)].some((m) => opaque(m[0]) === opaque(etag));
}

const wholeSeconds = (ms: number) => Math.floor(ms / 1000) * 1000;

/**
 * `If-Range` uses the strong comparison; a date matches only the exact `Last-Modified`. The
 * output never changes once written, so its modification time is as strong as its tag.
 */
function ifRangeHolds(header: string, v: Validators): boolean {
  const value = header.trim();
  if (value.startsWith('"') || value.startsWith('W/')) return !value.startsWith('W/') && v.etag !== null && value === v.etag;
  const date = Date.parse(value);
  return !Number.isNaN(date) && date === wholeSeconds(v.lastModified.getTime());
}

const BYTE_RANGE = /^\s*(\d*)\s*-\s*(\d*)\s*$/;

/**
 * One `bytes=` range against `size` bytes: the range, 'unsatisfiable', or null when the header
 * is to be ignored (another unit, bad syntax, or several ranges, which are answered whole).
 */
export function parseRange(header: string, size: number): ByteRange | 'unsatisfiable' | null {
  const eq = header.indexOf('=');
  if (eq < 0 || header.slice(0, eq).trim().toLowerCase() !== 'bytes') return null;
  const specs = header.slice(eq + 1).split(',');
  if (specs.length !== 1) return null;
  const m = BYTE_RANGE.exec(specs[0]!);
  if (!m || (m[1] === '' && m[2] === '')) return null;
  if (m[1] === '') {
    const suffix = Number(m[2]);
    return suffix === 0 || size === 0 ? 'unsatisfiable' : { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(m[1]);
  const last = m[2] === '' ? Infinity : Number(m[2]);
  if (last < start) return null;
  return start >= size ? 'unsatisfiable' : { start, end: Math.min(last, size - 1) };
}

/** Weighs the request's validators and range against the representation's, in the RFC's order. */
export function select(req: { method: string; header(name: string): string | undefined }, v: Validators, size: number): Selection {
  const ifNoneMatch = req.header('if-none-match');
  if (ifNoneMatch !== undefined) {
    if (noneMatchHits(ifNoneMatch, v.etag)) return { kind: 'not-modified' };
  } else {
    const since = Date.parse(req.header('if-modified-since') ?? '');
    if (!Number.isNaN(since) && wholeSeconds(v.lastModified.getTime()) <= since) return { kind: 'not-modified' };
  }
  const range = req.header('range');
  // Range is defined for GET only; a HEAD answers as its GET would without one.
  if (req.method !== 'GET' || range === undefined) return { kind: 'full' };
  const ifRange = req.header('if-range');
  if (ifRange !== undefined && !ifRangeHolds(ifRange, v)) return { kind: 'full' };
  const parsed = parseRange(range, size);
  if (parsed === null) return { kind: 'full' };
  return parsed === 'unsatisfiable' ? { kind: 'unsatisfiable' } : { kind: 'part', range: parsed };
}
