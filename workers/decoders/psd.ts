import Psd from '@webtoon/psd';
import { initializeCanvas, readPsd } from 'ag-psd';
import { JobError } from '../contract.ts';
import { admitPixels } from '../image/decode-policy.ts';
import { sharpFromPixels } from './pixels.ts';
import { compositeLayers } from './psd-layers.ts';
import type { Decoded, DecodeLimits } from './types.ts';

/**
 * PSD: the composite (merged) image Photoshop stores beside the layers — what the document
 * looks like. A file saved without "Maximize Compatibility" says in its version-info resource
 * that this merged image is not real (it is blank white); its layers are composited instead (see
 * psd-layers.ts). Readers of the merged image, tried in order:
 * - the merged image read here for greyscale, RGB and CMYK at 8/16 bits, handed to libvips with
 *   the document's ICC profile (CMYK inks become sRGB the way Photoshop shows them). Measured on
 *   the corpus: ag-psd refuses CMYK and returns a flat, unscaled 16-bit composite; @webtoon/psd
 *   crashes on 16-bit and takes the four CMYK ink planes for RGBA.
 * - ag-psd, then @webtoon/psd, for the other modes (indexed, Lab, bitmap, 32-bit).
 */

// ag-psd asks a canvas factory for its pixel buffers; with `useImageData` a plain buffer will do.
const imageData = (width: number, height: number) => ({ width, height, data: new Uint8ClampedArray(width * height * 4), colorSpace: 'srgb' });
initializeCanvas(
  () => {
    throw new Error('PSD decoding needs no canvas');
  },
  imageData as unknown as Parameters<typeof initializeCanvas>[1],
);

interface PsdHeader {
  big: boolean;
  channels: number;
  width: number;
  height: number;
  depth: number;
  colorMode: number;
}

export async function decodePsd(bytes: Buffer, limits: DecodeLimits): Promise<Decoded> {
  const header = readHeader(bytes);
  await admitPixels(header.width, header.height, limits.maxPixels);
  let first: unknown;
  const { resources } = sectionsOf(bytes, header);
  if (!hasRealMergedData(resources)) {
    try {
      const c = compositeLayers(bytes, limits.maxPixels);
      const icc = iccResource(resources);
      return { image: sharpFromPixels({ data: c.data, width: c.width, height: c.height, channels: 4, icc }), width: c.width, height: c.height, orientation: 1, via: 'psd-layers' };
    } catch (err) {
      if (err instanceof JobError && err.code === 'image.too_many_pixels') throw err;
      // Layers in a mode the compositor does not read (CMYK, Lab…): the stored image is all there is.
      first = err;
    }
  }
  for (const read of [decodeComposite, fromAgPsd, fromWebtoon]) {
    try {
      return await read(bytes, header);
    } catch (err) {
      if (err instanceof JobError && (err.code === 'image.truncated' || err.code === 'image.too_many_pixels')) throw err;
      first ??= err;
    }
  }
  const message = first instanceof Error ? first.message : String(first);
  throw new JobError('image.decode_failed', `The PSD composite could not be decoded: ${message}`);
}

function readHeader(b: Buffer): PsdHeader {
  if (b.length < 26 || b.toString('latin1', 0, 4) !== '8BPS') throw new JobError('image.decode_failed', 'The PSD header is missing or damaged.');
  const version = b.readUInt16BE(4);
  if (version !== 1 && version !== 2) throw new JobError('image.unsupported_variant', `PSD version ${version} is not supported.`);
  return { big: version === 2, channels: b.readUInt16BE(12), height: b.readUInt32BE(14), width: b.readUInt32BE(18), depth: b.readUInt16BE(22), colorMode: b.readUInt16BE(24) };
}

function fromAgPsd(bytes: Buffer, header: PsdHeader): Decoded {
  const psd = readPsd(bytes, { skipLayerImageData: true, skipThumbnail: true, skipLinkedFilesData: true, useImageData: true });
  const img = psd.imageData;
  if (!img) throw new Error('the file has no composite image');
  const icc = iccResource(sectionsOf(bytes, header).resources);
  const data = img.data instanceof Float32Array ? floatToShort(img.data) : img.data instanceof Uint16Array ? img.data : new Uint8Array(img.data.buffer, img.data.byteOffset, img.data.length);
  return { image: sharpFromPixels({ data, width: img.width, height: img.height, channels: 4, icc }), width: img.width, height: img.height, orientation: 1, via: 'ag-psd' };
}

async function fromWebtoon(bytes: Buffer): Promise<Decoded> {
  const psd = Psd.parse(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length) as ArrayBuffer);
  const rgba = await psd.composite();
  const icc = psd.icc_profile ? Buffer.from(psd.icc_profile) : undefined;
  const data = new Uint8Array(rgba.buffer, rgba.byteOffset, rgba.length);
  return { image: sharpFromPixels({ data, width: psd.width, height: psd.height, channels: 4, icc }), width: psd.width, height: psd.height, orientation: 1, via: '@webtoon/psd' };
}

function floatToShort(f: Float32Array): Uint16Array {
  const out = new Uint16Array(f.length);
  for (let i = 0; i < f.length; i++) out[i] = Math.round(Math.min(1, Math.max(0, f[i])) * 65535);
  return out;
}

const COLOR_MODES: Record<number, { name: string; colours: number }> = { 1: { name: 'grey', colours: 1 }, 3: { name: 'rgb', colours: 3 }, 4: { name: 'cmyk', colours: 4 } };

/**
 * The merged image as stored: planar channels, raw or PackBits, 8 or 16 bits; CMYK inks are
 * stored inverted (255 = no ink). The first extra channel is the merged transparency only when
 * the layer count is negative (Photoshop's flag for it); other extra channels are saved selections
 * or spot colours and are not part of the picture.
 */
function decodeComposite(b: Buffer, h: PsdHeader): Decoded {
  const mode = COLOR_MODES[h.colorMode];
  if (!mode || (h.depth !== 8 && h.depth !== 16)) throw new JobError('image.unsupported_variant', `${h.depth}-bit PSD colour mode ${h.colorMode} is not read directly.`);
  const { resources, imageData: at, mergedAlpha } = sectionsOf(b, h);
  let pos = at;
  if (pos + 2 > b.length) throw new JobError('image.truncated', 'The PSD file has no composite image data.');
  const compression = b.readUInt16BE(pos);
  pos += 2;
  if (h.channels < mode.colours) throw new JobError('image.decode_failed', 'The PSD declares fewer channels than its colour mode needs.');
  const planes = mode.colours + (mergedAlpha && h.channels > mode.colours ? 1 : 0);
  const bytesPerSample = h.depth / 8;
  const rowBytes = h.width * bytesPerSample;
  const planeBytes = rowBytes * h.height;
  const planar = Buffer.alloc(planeBytes * planes);
  if (compression === 0) {
    if (pos + planar.length > b.length) throw new JobError('image.truncated', 'The PSD composite image is cut short.');
    b.copy(planar, 0, pos, pos + planar.length);
  } else if (compression === 1) {
    const countBytes = h.big ? 4 : 2;
    const rows = h.height * h.channels;
    if (pos + rows * countBytes > b.length) throw new JobError('image.truncated', 'The PSD composite image is cut short.');
    let data = pos + rows * countBytes;
    for (let r = 0; r < h.height * planes; r++) {
      const count = countBytes === 4 ? b.readUInt32BE(pos + r * 4) : b.readUInt16BE(pos + r * 2);
      if (data + count > b.length) throw new JobError('image.truncated', 'The PSD composite image is cut short.');
      unpackBits(b.subarray(data, data + count), planar.subarray(r * rowBytes, (r + 1) * rowBytes));
      data += count;
    }
  } else {
    throw new JobError('image.unsupported_variant', `PSD composite compression ${compression} is not read directly.`);
  }
  const pixels = h.width * h.height;
  const cmyk = mode.name === 'cmyk';
  const max = h.depth === 16 ? 65535 : 255;
  const out = h.depth === 16 ? new Uint16Array(pixels * planes) : new Uint8Array(pixels * planes);
  for (let c = 0; c < planes; c++) {
    const invert = cmyk && c < 4;
    const base = c * planeBytes;
    for (let i = 0; i < pixels; i++) {
      const v = h.depth === 16 ? planar.readUInt16BE(base + i * 2) : planar[base + i];
      out[i * planes + c] = invert ? max - v : v;
    }
  }
  const icc = iccResource(resources);
  const channels = planes as 1 | 2 | 3 | 4 | 5;
  return { image: sharpFromPixels({ data: out, width: h.width, height: h.height, channels, icc, cmyk }), width: h.width, height: h.height, orientation: 1, via: 'psd-composite' };
}

/**
 * The image-resources block, where the composite image data starts, and whether the merged image
 * carries transparency: a negative layer count, in the layer-info section or, in 16- and 32-bit
 * files (whose layer-info section is empty), in the `Lr16`/`Lr32` block that replaces it.
 */
function sectionsOf(b: Buffer, h: PsdHeader): { resources: Buffer; imageData: number; mergedAlpha: boolean } {
  let pos = 26;
  const section = (lengthBytes: 4 | 8) => {
    if (pos + lengthBytes > b.length) throw new JobError('image.truncated', 'The PSD file is cut short.');
    const len = lengthBytes === 8 ? Number(b.readBigUInt64BE(pos)) : b.readUInt32BE(pos);
    const start = pos + lengthBytes;
    pos = start + len;
    if (pos > b.length) throw new JobError('image.truncated', 'The PSD file is cut short.');
    return b.subarray(start, pos);
  };
  section(4);
  const resources = section(4);
  const layers = section(h.big ? 8 : 4);
  const infoBytes = h.big ? 8 : 4;
  const infoLength = layers.length >= infoBytes ? (h.big ? Number(layers.readBigUInt64BE(0)) : layers.readUInt32BE(0)) : 0;
  const count = infoLength >= 2 ? layers.readInt16BE(infoBytes) : deepLayerCount(layers, infoBytes + infoLength, h.big);
  return { resources, imageData: pos, mergedAlpha: count < 0 };
}

/** The layer count of an `Lr16`/`Lr32` block among the additional layer information after the global layer mask. */
function deepLayerCount(section: Buffer, at: number, big: boolean): number {
  if (at + 4 > section.length) return 0;
  let pos = at + 4 + section.readUInt32BE(at);
  while (pos + 12 <= section.length) {
    const signature = section.toString('latin1', pos, pos + 4);
    if (signature !== '8BIM' && signature !== '8B64') return 0;
    const key = section.toString('latin1', pos + 4, pos + 8);
    // In PSB files these keys (among others) have 8-byte lengths.
    const wide = big && ['LMsk', 'Lr16', 'Lr32', 'Layr', 'Mt16', 'Mt32', 'Mtrn', 'Alph', 'FMsk', 'lnk2', 'FEid', 'FXid', 'PxSD'].includes(key);
    const len = wide ? Number(section.readBigUInt64BE(pos + 8)) : section.readUInt32BE(pos + 8);
    const body = pos + 8 + (wide ? 8 : 4);
    if ((key === 'Lr16' || key === 'Lr32') && body + (wide ? 10 : 6) <= section.length) return section.readInt16BE(body + (wide ? 8 : 4));
    pos = body + len;
    // Writers pad the data to an even (some to a 4-byte) length without always counting it.
    for (let pad = 0; pad < 4 && pos + pad + 4 <= section.length; pad++) {
      if (/^8B(IM|64)$/.test(section.toString('latin1', pos + pad, pos + pad + 4))) {
        pos += pad;
        break;
      }
    }
  }
  return 0;
}

function unpackBits(src: Buffer, dst: Buffer): void {
  let i = 0;
  let o = 0;
  while (i < src.length && o < dst.length) {
    const n = (src[i++] << 24) >> 24;
    if (n >= 0) {
      const end = Math.min(i + n + 1, src.length);
      while (i < end && o < dst.length) dst[o++] = src[i++];
    } else if (n !== -128) {
      const v = src[i++];
      for (let k = 0; k < 1 - n && o < dst.length; k++) dst[o++] = v;
    }
  }
}

/** Image resource 1039: the document's ICC profile. */
function iccResource(r: Buffer): Buffer | undefined {
  const body = resource(r, 1039);
  return body ? Buffer.from(body) : undefined;
}

/** Image resource 1057 (version info): its fifth byte is Photoshop's "has real merged data" flag; files without it are taken as having it. */
function hasRealMergedData(r: Buffer): boolean {
  const body = resource(r, 1057);
  return !body || body.length < 5 || body[4] !== 0;
}

function resource(r: Buffer, wanted: number): Buffer | undefined {
  let p = 0;
  while (p + 12 <= r.length && r.toString('latin1', p, p + 4) === '8BIM') {
    const id = r.readUInt16BE(p + 4);
    const nameLen = r[p + 6];
    p += 6 + ((nameLen + 2) & ~1);
    const size = r.readUInt32BE(p);
    p += 4;
    if (id === wanted) return r.subarray(p, Math.min(r.length, p + size));
    p += (size + 1) & ~1;
  }
  return undefined;
}
