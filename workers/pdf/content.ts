/** A PDF transformation matrix [a b c d e f]. */
export type Matrix = [number, number, number, number, number, number];

export const IDENTITY: Matrix = [1, 0, 0, 1, 0, 0];

/** m × n: apply m first, then n (the order of `cm` and form Matrix concatenation). */
export function multiply(m: Matrix, n: Matrix): Matrix {
  return [
    m[0] * n[0] + m[1] * n[2],
    m[0] * n[1] + m[1] * n[3],
    m[2] * n[0] + m[3] * n[2],
    m[2] * n[1] + m[3] * n[3],
    m[4] * n[0] + m[5] * n[2] + n[4],
    m[4] * n[1] + m[5] * n[3] + n[5],
  ];
}

/** An XObject drawn by `Do`, with the transformation in force at that point. */
export interface Draw {
  name: string;
  ctm: Matrix;
}

const WHITESPACE = new Set([0, 9, 10, 12, 13, 32]);
const DELIMITER = new Set([40, 41, 60, 62, 91, 93, 123, 125, 47, 37]);
const isRegular = (c: number): boolean => !WHITESPACE.has(c) && !DELIMITER.has(c);

/**
 * The `Do` operators of a content stream with their CTM, tracking only `q`, `Q` and `cm`: all the
 * placement of an image depends on. Strings, arrays, dictionaries and inline image data are
 * skipped without interpretation, so text and paths cost one pass over the bytes.
 */
export function findDraws(bytes: Uint8Array, start: Matrix = IDENTITY): Draw[] {
  const draws: Draw[] = [];
  const stack: Matrix[] = [];
  let ctm = start;
  let operands: (number | string | null)[] = [];
  let i = 0;
  const n = bytes.length;
  const word = (): string => {
    const s = i;
    while (i < n && isRegular(bytes[i])) i++;
    return Buffer.from(bytes.buffer, bytes.byteOffset + s, i - s).toString('latin1');
  };
  while (i < n) {
    const c = bytes[i];
    if (WHITESPACE.has(c)) {
      i++;
    } else if (c === 37) {
      while (i < n && bytes[i] !== 10 && bytes[i] !== 13) i++;
    } else if (c === 40) {
      i = skipLiteralString(bytes, i);
      operands.push(null);
    } else if (c === 60 && bytes[i + 1] !== 60) {
      while (i < n && bytes[i] !== 62) i++;
      i++;
      operands.push(null);
    } else if (c === 47) {
      i++;
      operands.push('/' + word());
    } else if (!isRegular(c)) {
      // Array and dictionary brackets: their contents are operands we never need.
      i += c === 60 || c === 62 ? 2 : 1;
      operands.push(null);
    } else {
      const token = word();
      const num = Number(token);
      if (token !== '' && /^[+-]?(\d+\.?\d*|\.\d+)$/.test(token) && Number.isFinite(num)) {
        operands.push(num);
        continue;
      }
      if (token === '') {
        i++;
        continue;
      }
      switch (token) {
        case 'q':
          stack.push(ctm);
          break;
        case 'Q':
          ctm = stack.pop() ?? ctm;
          break;
        case 'cm': {
          const m = operands.slice(-6);
          if (m.length === 6 && m.every((x) => typeof x === 'number')) ctm = multiply(m as Matrix, ctm);
          break;
        }
        case 'Do': {
          const last = operands[operands.length - 1];
          if (typeof last === 'string') draws.push({ name: last.slice(1), ctm });
          break;
        }
        case 'BI':
          i = skipInlineImage(bytes, i);
          break;
      }
      operands = [];
    }
  }
  return draws;
}

function skipLiteralString(bytes: Uint8Array, from: number): number {
  let depth = 0;
  let i = from;
  while (i < bytes.length) {
    const c = bytes[i];
    if (c === 92) i += 2;
    else {
      if (c === 40) depth++;
      else if (c === 41 && --depth === 0) return i + 1;
      i++;
    }
  }
  return i;
}

/** From just after `BI` to just after the matching `EI` (whitespace-delimited, as readers require). */
function skipInlineImage(bytes: Uint8Array, from: number): number {
  let i = from;
  const n = bytes.length;
  while (i + 2 < n && !(bytes[i] === 73 && bytes[i + 1] === 68 && WHITESPACE.has(bytes[i + 2]) && WHITESPACE.has(bytes[i - 1]))) i++;
  i += 3;
  while (i + 1 < n) {
    if (bytes[i] === 69 && bytes[i + 1] === 73 && WHITESPACE.has(bytes[i - 1]) && (i + 2 >= n || WHITESPACE.has(bytes[i + 2]))) return i + 2;
    i++;
  }
  return n;
}
