import { tiffReader, withoutThumbnail } from '../image/exif-thumbnail.ts';

/**
 * EXIF carried into a JPG output: the source's block (TIFF structure) goes into an APP1 segment
 * with its Orientation reset to 1, since the pixels were already turned upright, and without its
 * thumbnail (image/exif-thumbnail.ts).
 */
const EXIF_MARKER = Buffer.from('Exif\0\0', 'latin1');
const MAX_SEGMENT = 65533;

export function insertExif(jpeg: Buffer, exif: Buffer | undefined): Buffer {
  if (!exif?.length) return jpeg;
  const block = exif.subarray(0, 6).equals(EXIF_MARKER) ? exif.subarray(6) : exif;
  const tiff = withoutThumbnail(block) ?? Buffer.from(block);
  if (!resetOrientation(tiff)) return jpeg;
  const payload = Buffer.concat([EXIF_MARKER, tiff]);
  if (payload.length + 2 > MAX_SEGMENT) return jpeg;
  const segment = Buffer.alloc(4);
  segment.writeUInt16BE(0xffe1, 0);
  segment.writeUInt16BE(payload.length + 2, 2);
  // After SOI and a JFIF APP0, where readers expect APP1.
  let at = 2;
  if (jpeg[2] === 0xff && jpeg[3] === 0xe0) at = 4 + jpeg.readUInt16BE(4);
  return Buffer.concat([jpeg.subarray(0, at), segment, payload, jpeg.subarray(at)]);
}

/** Sets IFD0's Orientation (0x0112) to 1 in place; false when the block is not a readable TIFF structure. */
function resetOrientation(t: Buffer): boolean {
  const reader = tiffReader(t);
  if (!reader) return false;
  const { le, u16, u32 } = reader;
  if (u16(2) !== 42) return false;
  const ifd = u32(4);
  if (ifd + 2 > t.length) return false;
  const count = u16(ifd);
  for (let i = 0; i < count; i++) {
    const e = ifd + 2 + i * 12;
    if (e + 12 > t.length) return false;
    if (u16(e) === 0x0112) {
      if (le) t.writeUInt16LE(1, e + 8);
      else t.writeUInt16BE(1, e + 8);
    }
  }
  return true;
}
