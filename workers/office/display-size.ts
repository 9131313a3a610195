import type { Readable } from 'node:stream';
import { SaxesParser, type SaxesAttributeNS } from 'saxes';
import { xmlText } from './xml-text.ts';

const EMU_PER_INCH = 914_400;
/** Office's own "Print (220 ppi)" target: sharp on paper and on a 4K screen at page width. */
export const TARGET_PPI = 220;

/** Pixels a picture needs (before its crop is applied) to keep TARGET_PPI where it is shown. */
export interface Need {
  width: number;
  height: number;
}

/** One use of an image part in a drawing: its need, or null when the drawing does not say how large it is shown. */
export interface ImageUse {
  part: string;
  need: Need | null;
}

/** Shapes whose own extent is the displayed size of a picture inside them. */
const CONTAINERS = new Set(['inline', 'anchor', 'pic', 'sp', 'wsp']);

interface Blip {
  part: string;
  crop: { l: number; t: number; r: number; b: number };
  tiled: boolean;
}

interface Frame {
  local: string;
  /** Group scaling applied to this element's own coordinates. */
  scale: [number, number];
  /** Group scaling applied to child shapes: `scale` times this group's ext/chExt. */
  childScale: [number, number];
  ext?: [number, number];
  chExt?: [number, number];
  pending: Blip[];
  blips: Blip[];
}

/**
 * Reads a drawing-bearing XML part (document, header, slide, layout, diagram drawing…) and
 * reports every use of an image relationship. A DrawingML picture (`a:blip r:embed`) gets the
 * extent of the shape that shows it: `wp:extent` or `spPr/xfrm/ext` in EMU, scaled by the groups
 * around it, divided by the visible fraction left by `a:srcRect` (crop percentages keep their
 * meaning after a uniform downscale). Any other use — VML, OLE previews, backgrounds, table-cell
 * and tiled fills — has an unknown display size (need null), which keeps that image at its size.
 */
export async function scanImageUses(stream: Readable, imageRels: Map<string, string>): Promise<ImageUse[]> {
  const scan = new UseScan(imageRels);
  const parser = new SaxesParser({ xmlns: true });
  parser.on('opentag', (tag) => {
    scan.open(tag.local, tag.attributes as Record<string, SaxesAttributeNS>);
    if (tag.isSelfClosing) scan.close();
  });
  parser.on('closetag', (tag) => {
    if (!tag.isSelfClosing) scan.close();
  });
  for await (const text of xmlText(stream)) parser.write(text);
  parser.close();
  return scan.finish();
}

/** The state of scanImageUses: the open elements and the uses found so far. */
class UseScan {
  private readonly uses: ImageUse[] = [];
  private readonly root: Frame = { local: '#document', scale: [1, 1], childScale: [1, 1], pending: [], blips: [] };
  private readonly stack: Frame[] = [this.root];

  constructor(private readonly imageRels: Map<string, string>) {}

  open(local: string, attrs: Record<string, SaxesAttributeNS>): void {
    const { stack } = this;
    const parent = stack[stack.length - 1];
    const frame: Frame = { local, scale: parent.childScale, childScale: parent.childScale, pending: [], blips: [] };
    const value = (name: string): number | undefined => {
      const a = Object.values(attrs).find((x) => x.local === name && x.uri === '');
      const n = a ? Number(a.value) : NaN;
      return Number.isFinite(n) ? n : undefined;
    };
    for (const attr of Object.values(attrs)) {
      const part = isRelationshipAttr(attr) ? this.imageRels.get(attr.value) : undefined;
      if (!part) continue;
      if (local === 'blip' && attr.local === 'embed' && parent.local === 'blipFill') {
        const blip: Blip = { part, crop: { l: 0, t: 0, r: 0, b: 0 }, tiled: false };
        parent.blips.push(blip);
        this.container().pending.push(blip);
      } else {
        this.uses.push({ part, need: null });
      }
    }
    if (local === 'srcRect' && parent.local === 'blipFill') {
      for (const b of parent.blips) b.crop = { l: value('l') ?? 0, t: value('t') ?? 0, r: value('r') ?? 0, b: value('b') ?? 0 };
    } else if (local === 'tile' && parent.local === 'blipFill') {
      for (const b of parent.blips) b.tiled = true;
    } else if (local === 'extent' || local === 'ext' || local === 'chExt') {
      const cx = value('cx');
      const cy = value('cy');
      if (cx !== undefined && cy !== undefined) this.extent(local, cx, cy);
    }
    stack.push(frame);
  }

  /**
   * A `wp:extent`, or an `a:ext`/`a:chExt` inside an `xfrm`: the extent of the shape around it,
   * or of the group whose `grpSpPr` holds it (which scales the group's children).
   */
  private extent(local: string, cx: number, cy: number): void {
    const { stack } = this;
    const parent = stack[stack.length - 1];
    const grand = stack[stack.length - 2];
    if (local === 'extent') {
      const c = this.container();
      if (c !== this.root && c.ext === undefined) c.ext = [cx * c.scale[0], cy * c.scale[1]];
      return;
    }
    if (parent.local !== 'xfrm' || !grand) return;
    if (grand.local === 'spPr' && local === 'ext') {
      const c = this.container();
      if (c !== this.root) c.ext = [cx * c.scale[0], cy * c.scale[1]];
    } else if (grand.local === 'grpSpPr') {
      const group = stack[stack.length - 3];
      if (!group) return;
      if (local === 'ext') group.ext = [cx, cy];
      else group.chExt = [cx, cy];
      if (group.ext && group.chExt && group.chExt[0] > 0 && group.chExt[1] > 0) {
        group.childScale = [group.scale[0] * (group.ext[0] / group.chExt[0]), group.scale[1] * (group.ext[1] / group.chExt[1])];
      }
    }
  }

  close(): void {
    const frame = this.stack.pop();
    if (!frame || frame.pending.length === 0) return;
    if (CONTAINERS.has(frame.local) && frame.ext) {
      for (const blip of frame.pending) this.uses.push({ part: blip.part, need: needOf(blip, frame.ext) });
    } else {
      const outer = this.container();
      if (outer === this.root) for (const blip of frame.pending) this.uses.push({ part: blip.part, need: null });
      else outer.pending.push(...frame.pending);
    }
  }

  finish(): ImageUse[] {
    for (const blip of this.root.pending) this.uses.push({ part: blip.part, need: null });
    return this.uses;
  }

  /** The innermost open shape whose extent is a picture's displayed size, or the root. */
  private container(): Frame {
    const { stack } = this;
    for (let i = stack.length - 1; i > 0; i--) if (CONTAINERS.has(stack[i].local)) return stack[i];
    return this.root;
  }
}

function isRelationshipAttr(attr: SaxesAttributeNS): boolean {
  return attr.uri.endsWith('/relationships');
}

function needOf(blip: Blip, ext: [number, number]): Need | null {
  if (blip.tiled) return null;
  const fx = 1 - (blip.crop.l + blip.crop.r) / 100_000;
  const fy = 1 - (blip.crop.t + blip.crop.b) / 100_000;
  const [cx, cy] = ext;
  if (!(cx > 0 && cy > 0 && fx > 0.01 && fy > 0.01)) return null;
  return { width: ((cx / EMU_PER_INCH) * TARGET_PPI) / fx, height: ((cy / EMU_PER_INCH) * TARGET_PPI) / fy };
}

/** Combines every use of each image part: the largest need wins, and one unknown use makes the whole part unknown. */
export function combineUses(uses: Iterable<ImageUse>): Map<string, Need | null> {
  const out = new Map<string, Need | null>();
  for (const { part, need } of uses) {
    const key = part.toLowerCase();
    const prev = out.get(key);
    if (prev === null || need === null) out.set(key, null);
    else out.set(key, prev ? { width: Math.max(prev.width, need.width), height: Math.max(prev.height, need.height) } : need);
  }
  return out;
}
