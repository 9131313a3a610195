import { tiffReader } from './exif-thumbnail.ts';
import { headerSegments } from './jpeg-quant.ts';

/**
 * The APPn segments libvips takes a JPEG's metadata from, whole (marker and length included), in file
 * order: JFIF (its density), EXIF, XMP, the ICC profile's chunks and IPTC. Not the rest: a camera's
 * private segments, Adobe's APP14 (how the samples were coded) or MPF's index of pictures appended to
 * the file (a phone's gain map or depth map, which a stand-in without them would point past its end).
 */
export function appSegments(jpeg: Buffer): Buffer[] {
  const kept: Buffer[] = [];
  for (const { marker, start, end } of headerSegments(jpeg)) {
    const payload = jpeg.subarray(start, end);
    if (end <= jpeg.length && METADATA.some(([m, id]) => m === marker && payload.subarray(0, id.length).equals(id))) kept.push(jpeg.subarray(start - 4, end));
  }
  return kept;
}

const EXIF = Buffer.from('Exif\0\0', 'latin1');
const METADATA: [number, Buffer][] = [
  [0xe0, Buffer.from('JFIF\0', 'latin1')],
  [0xe1, EXIF],
  [0xe1, Buffer.from('http://ns.adobe.com/xap/1.0/\0', 'latin1')],
  [0xe2, Buffer.from('ICC_PROFILE\0', 'latin1')],
  [0xed, Buffer.from('Photoshop 3.0\0', 'latin1')],
];

/** `encoded` (an encode of raw pixels, which has no APPn segment of its own) with `segments` after its SOI. */
export function withSegments(encoded: Buffer, segments: Buffer[]): Buffer {
  return segments.length === 0 ? encoded : Buffer.concat([encoded.subarray(0, 2), ...segments, encoded.subarray(2)]);
}

const EXIF_IFD = 0x8769;
const PIXEL_X_DIMENSION = 0xa002;
const PIXEL_Y_DIMENSION = 0xa003;

/**
 * Sets EXIF's PixelXDimension and PixelYDimension (where the block has them) in the APP1 segments
 * among `segments`, in place: what libvips writes there is the size of the picture it saved.
 */
export function setExifDimensions(segments: Buffer[], width: number, height: number): void {
  for (const s of segments) {
    if (s[1] !== 0xe1 || !s.subarray(4, 10).equals(EXIF)) continue;
    const tiff = s.subarray(10);
    const reader = tiffReader(tiff);
    if (!reader) continue;
    const { le, u16, u32 } = reader;
    const entries = (ifd: number) => {
      const count = ifd + 2 <= tiff.length ? u16(ifd) : 0;
      return Array.from({ length: count }, (_, i) => ifd + 2 + i * 12).filter((e) => e + 12 <= tiff.length);
    };
    const exifIfd = entries(u32(4)).find((e) => u16(e) === EXIF_IFD);
    if (exifIfd === undefined) continue;
    for (const e of entries(u32(exifIfd + 8))) {
      const tag = u16(e);
      if (tag !== PIXEL_X_DIMENSION && tag !== PIXEL_Y_DIMENSION) continue;
      const value = tag === PIXEL_X_DIMENSION ? width : height;
      const type = u16(e + 2);
      if (type === 3) {
        if (le) tiff.writeUInt16LE(value, e + 8);
        else tiff.writeUInt16BE(value, e + 8);
      } else if (type === 4) {
        if (le) tiff.writeUInt32LE(value, e + 8);
        else tiff.writeUInt32BE(value, e + 8);
      }
    }
  }
}
