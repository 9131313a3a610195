import sharp from 'sharp';
import type { Sharp } from 'sharp';
import { admitPixels, checkPixelBudget, decodeOptions, MAX_PIXELS } from '../image/decode-policy.ts';
import { readHeader, type HeaderFacts, type ImageSource } from '../image/probe.ts';
import { isSrgbProfile } from '../image/srgb-profile.ts';
import type { Decoded, DecodeLimits } from './types.ts';

export interface LibvipsRead {
  /** Every frame (an animation), all counted against the budget; otherwise the first frame or page. */
  animated?: boolean;
  maxPixels?: number;
  /** `reserve`: the worker's memory budget is reserved for the pixels; `reserved`: the caller did (a document's pictures). */
  memory: 'reserve' | 'reserved';
  /** Samples as stored, no colour management (a PDF's ColorSpace rules). */
  ignoreIcc?: boolean;
}

/**
 * A picture libvips reads: its header (image/probe.ts), the pixel budget from it before any pixel
 * is decoded, then the pipeline with the image door's strictness (image/decode-policy.ts): corrupt
 * or truncated pixel data fails the job instead of producing a half-grey picture. An embedded sRGB
 * profile is not converted through (image/srgb-profile.ts): the pixels are sRGB as stored.
 */
export async function openWithLibvips(source: ImageSource, read: LibvipsRead): Promise<{ image: Sharp; facts: HeaderFacts; asStored: boolean }> {
  const { animated = false, maxPixels = MAX_PIXELS } = read;
  const facts = await readHeader(source, animated);
  const frames = animated ? facts.pages : 1;
  if (read.memory === 'reserve') await admitPixels(facts.width, facts.height, maxPixels, frames);
  else checkPixelBudget(facts.width, facts.height, maxPixels, frames);
  const ignoreIcc = read.ignoreIcc || (await srgbAsStored(facts));
  const image = sharp(source, decodeOptions({ limitInputPixels: maxPixels, ...(animated ? { animated } : {}), ...(ignoreIcc ? { ignoreIcc } : {}) }));
  return { image, facts, asStored: ignoreIcc };
}

/** An embedded profile that is sRGB itself, on 8-bit RGB: the pixels are taken as stored, not converted through it. */
export async function srgbAsStored(facts: HeaderFacts): Promise<boolean> {
  return facts.icc !== undefined && facts.space === 'srgb' && facts.depth === 'uchar' && (await isSrgbProfile(facts.icc));
}

/**
 * JPEG, PNG, WebP, AVIF, TIFF and GIF: formats sharp's prebuilt libvips decodes correctly.
 * Only the first frame or page is decoded (animated WebP/GIF/AVIF, multi-page TIFF); the pixel
 * budget is checked on that page from the header.
 */
export async function decodeWithSharp(bytes: Buffer, limits: DecodeLimits): Promise<Decoded> {
  const { image, facts } = await openWithLibvips(bytes, { maxPixels: limits.maxPixels, memory: 'reserve' });
  return { image, width: facts.width, height: facts.height, orientation: facts.orientation, exif: facts.exif, via: `sharp:${facts.format}` };
}
