/**
 * Whether a JPEG's EXIF (APP1) holds GPS coordinates: a GPS IFD pointer (tag 0x8825) in IFD0
 * whose IFD has a latitude or longitude entry. Reads only the segments before the picture data,
 * so the first 128 KB of a file are enough.
 */
export function jpegHasLocation(bytes: Uint8Array): boolean {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (view.byteLength < 4 || view.getUint16(0) !== 0xffd8) return false;
  let at = 2;
  while (at + 4 <= view.byteLength) {
    const marker = view.getUint16(at);
    if ((marker & 0xff00) !== 0xff00 || marker === 0xffda) return false;
    const length = view.getUint16(at + 2);
    if (marker === 0xffe1 && at + 10 <= view.byteLength && view.getUint32(at + 4) === 0x45786966) {
      return tiffHasLocation(new DataView(bytes.buffer, bytes.byteOffset + at + 10, Math.min(length - 8, view.byteLength - at - 10)));
    }
    at += 2 + length;
  }
  return false;
}

function tiffHasLocation(tiff: DataView): boolean {
  if (tiff.byteLength < 8) return false;
  const little = tiff.getUint16(0) === 0x4949;
  const u16 = (o: number) => tiff.getUint16(o, little);
  const u32 = (o: number) => tiff.getUint32(o, little);
  const entries = (ifd: number) => {
    if (ifd + 2 > tiff.byteLength) return [];
    const out: { tag: number; value: number }[] = [];
    for (let i = 0, n = u16(ifd); i < n && ifd + 2 + i * 12 + 12 <= tiff.byteLength; i++) {
      const e = ifd + 2 + i * 12;
      out.push({ tag: u16(e), value: u32(e + 8) });
    }
    return out;
  };
  const gps = entries(u32(4)).find((e) => e.tag === 0x8825);
  // GPSLatitude (2) or GPSLongitude (4): a GPS IFD with only a version or a timestamp says nothing about where.
  return !!gps && entries(gps.value).some((e) => e.tag === 2 || e.tag === 4);
}
