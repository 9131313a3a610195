import { RAW_FORMATS } from '../../src/catalog/compressors/universal.ts';
import { JobError } from '../contract.ts';

/** Decoder families; the universal compressor maps each to one decoder module. */
export type Family = 'jpeg' | 'png' | 'gif' | 'webp' | 'avif' | 'heic' | 'tiff' | 'bmp' | 'psd' | 'raw';

const HEIC_BRANDS = new Set(['heic', 'heix', 'hevc', 'hevx', 'heim', 'heis', 'hevm', 'hevs', 'mif1', 'msf1', 'mif2']);
const AVIF_BRANDS = new Set(['avif', 'avis']);

const ascii = (b: Buffer, at: number, len: number) => b.toString('latin1', at, at + len);

/**
 * The format of a file from its first bytes; the declared extension only breaks the ties the bytes
 * cannot: a TIFF container declared as a RAW extension (DNG, NEF, CR2, ARW… are TIFF inside) goes
 * to LibRaw, and an unrecognised header goes to LibRaw when a RAW was declared (LibRaw identifies
 * the camera formats by content). Anything else that is not an image we read fails with
 * `image.format_mismatch`, naming what the bytes are when they are something well known.
 */
export function detectFamily(b: Buffer, declared: string): Family {
  const ext = declared.toLowerCase().replace(/^\./, '');
  const rawDeclared = RAW_FORMATS.includes(ext);
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'jpeg';
  if (b.length >= 8 && ascii(b, 0, 8) === '\x89PNG\r\n\x1a\n') return 'png';
  if (b.length >= 6 && (ascii(b, 0, 6) === 'GIF87a' || ascii(b, 0, 6) === 'GIF89a')) return 'gif';
  if (b.length >= 12 && ascii(b, 0, 4) === 'RIFF' && ascii(b, 8, 4) === 'WEBP') return 'webp';
  if (b.length >= 4 && ascii(b, 0, 4) === '8BPS') return 'psd';
  if (b.length >= 12 && ascii(b, 4, 4) === 'ftyp') {
    const boxSize = Math.min(b.readUInt32BE(0), b.length, 256);
    const brands = [ascii(b, 8, 4)];
    for (let o = 16; o + 4 <= boxSize; o += 4) brands.push(ascii(b, o, 4));
    if (brands.includes('crx ')) return 'raw';
    if (brands.some((x) => AVIF_BRANDS.has(x))) return 'avif';
    if (brands.some((x) => HEIC_BRANDS.has(x))) return 'heic';
  }
  if (b.length >= 4 && (ascii(b, 0, 4) === 'II*\0' || ascii(b, 0, 4) === 'MM\0*')) return rawDeclared ? 'raw' : 'tiff';
  if (b.length >= 2 && ascii(b, 0, 2) === 'BM' && b.length >= 26) return 'bmp';
  if (rawDeclared || isRawSignature(b)) return 'raw';
  throw new JobError('image.format_mismatch', `The file is not a ${ext.toUpperCase()} image${describe(b)}.`);
}

/** Camera RAW containers that are not TIFF-based. */
function isRawSignature(b: Buffer): boolean {
  const head = ascii(b, 0, 16);
  return (
    head.startsWith('FUJIFILMCCD-RAW') ||
    head.startsWith('FOVb') ||
    head.startsWith('\0MRM') ||
    head.startsWith('IIRO') ||
    head.startsWith('IIRS') ||
    head.startsWith('IIU\0') ||
    (head.startsWith('II\x1a\0') && ascii(b, 6, 8) === 'HEAPCCDR')
  );
}

function describe(b: Buffer): string {
  if (b.length === 0) return ' (the file is empty)';
  const head = ascii(b, 0, 8);
  if (head.startsWith('%PDF')) return ' (it is a PDF document)';
  if (head.startsWith('PK')) return ' (it is a ZIP archive)';
  return '';
}
