import { PDFBool, PDFHexString, PDFRawStream, PDFRef, PDFString } from 'pdf-lib';
import type { PDFContext, PDFDict, PDFObject } from 'pdf-lib';
import { filtersOf, undoFilters, type Filter } from './decode.ts';
import { arrayOf, get, name, nameOf, numberOf, numbersOf, resolve } from './objects.ts';

/** How sample values turn into colour: only gray and rgb may be resampled or turned into JPEG. */
export type Colour = 'gray' | 'rgb' | 'cmyk' | 'other';

export interface Palette {
  base: Colour;
  /** The base colour space object, which an expanded image takes as its own. */
  baseSpace: PDFObject;
  baseComponents: number;
  hival: number;
  lookup: Uint8Array;
}

export interface ImageInfo {
  width: number;
  height: number;
  bitsPerComponent: number;
  /** Samples per pixel as stored (1 for Indexed and image masks). */
  components: number;
  colour: Colour;
  palette?: Palette;
  imageMask: boolean;
  /** A colour-key /Mask (array of ranges): exact sample values matter, so no lossy coding. */
  colourKey: boolean;
  smask?: PDFRef;
  /** The SMask has /Matte (pre-multiplied colour): mask and image must keep equal dimensions. */
  matte: boolean;
  hasDecode: boolean;
  /** ColorSpace is plain DeviceRGB, so equal R, G and B mean exactly DeviceGray. */
  deviceRgb: boolean;
  filters: Filter[];
}

const DEVICE: Record<string, [Colour, number]> = {
  DeviceGray: ['gray', 1], G: ['gray', 1], CalGray: ['gray', 1],
  DeviceRGB: ['rgb', 3], RGB: ['rgb', 3], CalRGB: ['rgb', 3],
  DeviceCMYK: ['cmyk', 4], CMYK: ['cmyk', 4],
};

/** Colour family and component count of a colour space; undefined when it cannot be used. */
function colourSpace(ctx: PDFContext, cs: PDFObject | undefined, depth = 0): { colour: Colour; components: number; palette?: Palette } | undefined {
  const obj = resolve(ctx, cs);
  const simple = nameOf(ctx, obj);
  if (simple) return simple in DEVICE ? { colour: DEVICE[simple][0], components: DEVICE[simple][1] } : undefined;
  const items = arrayOf(ctx, obj);
  const family = items && nameOf(ctx, items[0]);
  if (!items || !family) return undefined;
  if (family === 'CalGray' || family === 'CalRGB') return { colour: DEVICE[family][0], components: DEVICE[family][1] };
  if (family === 'ICCBased') {
    const stream = resolve(ctx, items[1]);
    const n = stream instanceof PDFRawStream ? numberOf(ctx, get(ctx, stream.dict, 'N')) : undefined;
    if (n === 1) return { colour: 'gray', components: 1 };
    if (n === 3) return { colour: 'rgb', components: 3 };
    if (n === 4) return { colour: 'cmyk', components: 4 };
    return undefined;
  }
  if (family === 'Lab') return { colour: 'other', components: 3 };
  if (family === 'Separation') return { colour: 'other', components: 1 };
  if (family === 'DeviceN') return { colour: 'other', components: arrayOf(ctx, items[1])?.length ?? 0 };
  if ((family === 'Indexed' || family === 'I') && depth === 0) {
    const base = colourSpace(ctx, items[1], 1);
    const hival = numberOf(ctx, items[2]);
    const lookup = lookupBytes(ctx, items[3]);
    if (!base || hival === undefined || !lookup) return undefined;
    return { colour: 'other', components: 1, palette: { base: base.colour, baseSpace: items[1], baseComponents: base.components, hival, lookup } };
  }
  return undefined;
}

function lookupBytes(ctx: PDFContext, obj: PDFObject | undefined): Uint8Array | undefined {
  const o = resolve(ctx, obj);
  if (o instanceof PDFString || o instanceof PDFHexString) return o.asBytes();
  if (o instanceof PDFRawStream) {
    try {
      return undoFilters(ctx, filtersOf(ctx, o.dict), o.contents, 1 << 20);
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/** What an image XObject holds; undefined when its dictionary is not one we can reason about. */
export function imageInfo(ctx: PDFContext, dict: PDFDict): ImageInfo | undefined {
  const width = numberOf(ctx, get(ctx, dict, 'Width'));
  const height = numberOf(ctx, get(ctx, dict, 'Height'));
  if (!width || !height || width < 1 || height < 1) return undefined;
  const imageMask = get(ctx, dict, 'ImageMask') === PDFBool.True;
  const filters = filtersOf(ctx, dict);
  const bitsPerComponent = imageMask ? 1 : numberOf(ctx, get(ctx, dict, 'BitsPerComponent')) ?? 8;
  const cs = imageMask ? { colour: 'other' as Colour, components: 1 } : colourSpace(ctx, get(ctx, dict, 'ColorSpace'));
  if (!cs || cs.components < 1) return undefined;
  const smask = dict.get(name('SMask'));
  const smaskDict = resolve(ctx, smask);
  const matte = smaskDict instanceof PDFRawStream && get(ctx, smaskDict.dict, 'Matte') !== undefined;
  return {
    width,
    height,
    bitsPerComponent,
    components: cs.components,
    colour: cs.colour,
    palette: cs.palette,
    imageMask,
    colourKey: numbersOf(ctx, get(ctx, dict, 'Mask')) !== undefined,
    smask: smask instanceof PDFRef ? smask : undefined,
    matte,
    hasDecode: get(ctx, dict, 'Decode') !== undefined,
    deviceRgb: ['DeviceRGB', 'RGB'].includes(nameOf(ctx, get(ctx, dict, 'ColorSpace')) ?? ''),
    filters,
  };
}
