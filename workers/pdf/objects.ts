import { PDFArray, PDFDict, PDFName, PDFNumber, PDFRawStream, PDFRef, PDFStream } from 'pdf-lib';
import type { PDFContext, PDFObject } from 'pdf-lib';

/** Small typed accessors over pdf-lib's object model, so the rest reads as PDF terms. */

export const name = (n: string): PDFName => PDFName.of(n);

export function resolve(ctx: PDFContext, obj: PDFObject | undefined): PDFObject | undefined {
  return obj instanceof PDFRef ? ctx.lookup(obj) : obj;
}

export function dictOf(ctx: PDFContext, obj: PDFObject | undefined): PDFDict | undefined {
  const o = resolve(ctx, obj);
  if (o instanceof PDFDict) return o;
  if (o instanceof PDFStream) return o.dict;
  return undefined;
}

export function numberOf(ctx: PDFContext, obj: PDFObject | undefined): number | undefined {
  const o = resolve(ctx, obj);
  return o instanceof PDFNumber ? o.asNumber() : undefined;
}

/** Name without the slash, e.g. `FlateDecode`. */
export function nameOf(ctx: PDFContext, obj: PDFObject | undefined): string | undefined {
  const o = resolve(ctx, obj);
  return o instanceof PDFName ? o.decodeText() : undefined;
}

export function arrayOf(ctx: PDFContext, obj: PDFObject | undefined): PDFObject[] | undefined {
  const o = resolve(ctx, obj);
  return o instanceof PDFArray ? o.asArray() : undefined;
}

export function get(ctx: PDFContext, dict: PDFDict, key: string): PDFObject | undefined {
  return resolve(ctx, dict.get(name(key)));
}

/** Numbers of an array such as a MediaBox or a Matrix, or undefined when any entry is not a number. */
export function numbersOf(ctx: PDFContext, obj: PDFObject | undefined): number[] | undefined {
  const items = arrayOf(ctx, obj);
  if (!items) return undefined;
  const out = items.map((i) => numberOf(ctx, i));
  return out.every((n): n is number => n !== undefined) ? out : undefined;
}

/** Direct children of an object (dictionary values, array items, a stream's dictionary values). */
export function childrenOf(obj: PDFObject): PDFObject[] {
  if (obj instanceof PDFDict) return obj.values();
  if (obj instanceof PDFArray) return obj.asArray();
  if (obj instanceof PDFStream) return obj.dict.values();
  return [];
}

/** Every indirect object reachable from the trailer (Root and Info). */
export function reachableRefs(ctx: PDFContext): Set<PDFRef> {
  const seen = new Set<PDFRef>();
  const stack: PDFObject[] = [];
  const { Root, Info } = ctx.trailerInfo;
  if (Root) stack.push(Root);
  if (Info) stack.push(Info);
  while (stack.length > 0) {
    const obj = stack.pop()!;
    if (obj instanceof PDFRef) {
      if (seen.has(obj)) continue;
      seen.add(obj);
      const target = ctx.lookup(obj);
      if (target) stack.push(target);
      continue;
    }
    stack.push(...childrenOf(obj));
  }
  return seen;
}

/** Replaces every reference to a key of `map` by its value, in all objects and the trailer. */
export function rewriteRefs(ctx: PDFContext, map: Map<PDFRef, PDFRef>): void {
  if (map.size === 0) return;
  const fix = (obj: PDFObject): void => {
    const container = obj instanceof PDFStream ? obj.dict : obj;
    if (container instanceof PDFDict) {
      for (const [key, value] of container.entries()) {
        const to = value instanceof PDFRef ? map.get(value) : undefined;
        if (to) container.set(key, to);
        else if (!(value instanceof PDFRef)) fix(value);
      }
    } else if (container instanceof PDFArray) {
      container.asArray().forEach((value, i) => {
        const to = value instanceof PDFRef ? map.get(value) : undefined;
        if (to) container.set(i, to);
        else if (!(value instanceof PDFRef)) fix(value);
      });
    }
  };
  for (const [, obj] of ctx.enumerateIndirectObjects()) fix(obj);
  const t = ctx.trailerInfo;
  if (t.Root instanceof PDFRef && map.has(t.Root)) t.Root = map.get(t.Root)!;
  if (t.Info instanceof PDFRef && map.has(t.Info)) t.Info = map.get(t.Info)!;
}

/** All raw streams of the document with their references. */
export function rawStreams(ctx: PDFContext): [PDFRef, PDFRawStream][] {
  return ctx.enumerateIndirectObjects().filter((e): e is [PDFRef, PDFRawStream] => e[1] instanceof PDFRawStream);
}

/** A new raw stream replacing `old`'s contents; the dictionary is a copy so `old` stays intact. */
export function replaceStream(ctx: PDFContext, ref: PDFRef, dict: PDFDict, contents: Uint8Array): void {
  ctx.assign(ref, PDFRawStream.of(dict, contents));
}
