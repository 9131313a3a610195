// Files made with the properties issues name, from the shared corpus, for the tests and the
// benchmark alike: maximum-quality JPEG exports, a dithered palette BMP and TIFF, an AVIF whose
// container and bitstream disagree on the colour range, and Office documents whose pictures are
// what people paste into them (camera exports, photos saved as PNG).
import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import sharp from 'sharp';
import yauzl from 'yauzl';
import yazl from 'yazl';

const exec = promisify(execFile);
const corpus = new URL('../../../shared/corpus/', import.meta.url).pathname;

/** A corpus photo scaled so its longer edge is `edge` pixels, as lossless PNG bytes. */
export async function photo(name: string, edge: number): Promise<Buffer> {
  return sharp(`${corpus}jpg/${name}`).rotate().resize(edge, edge, { fit: 'inside' }).png({ compressionLevel: 1 }).toBuffer();
}

/** JPEG exports at quality 99–100 by different encoders (all-ones or near-ones tables). */
export async function maxQualityExports(dir: string, edge = 1600): Promise<string[]> {
  const made: [string, Buffer][] = [
    ['export-libjpeg-q100.jpg', await sharp(await photo('canon-dslr.jpg', edge)).jpeg({ quality: 100 }).toBuffer()],
    ['export-mozjpeg-q99.jpg', await sharp(await photo('craft-beer.jpg', edge)).jpeg({ quality: 99, mozjpeg: true }).toBuffer()],
    ['export-444-q98.jpg', await sharp(await photo('phone-IMG_20180725_163423.jpg', edge)).jpeg({ quality: 98, chromaSubsampling: '4:4:4' }).toBuffer()],
  ];
  const paths: string[] = [];
  for (const [name, bytes] of made) {
    paths.push(join(dir, name));
    await writeFile(paths[paths.length - 1], bytes);
  }
  return paths;
}

/**
 * An 8-bit palette BMP of a photo with Floyd–Steinberg dithering (what "save as 256 colours"
 * gives): the dither is fine luma noise that drives JPEG quality up, while the colour is smooth.
 * Made with ImageMagick (in the test packages).
 */
export async function ditheredPaletteBmp(path: string, edge = 900): Promise<string> {
  const png = `${path}.png`;
  await writeFile(png, await photo('craft-beer.jpg', edge));
  await exec('convert', [png, '-dither', 'FloydSteinberg', '-colors', '256', '-type', 'Palette', `BMP3:${path}`]);
  return path;
}

/**
 * A palette TIFF of a photo reduced to 64 colours with Floyd–Steinberg dithering, LZW-compressed
 * (what "save as indexed colour" in an image editor or an old scanner driver gives): small as a
 * file, and full of dither that JPEG must keep or smooth away. Made with ImageMagick.
 */
export async function ditheredPaletteTiff(path: string, edge = 800): Promise<string> {
  const png = `${path}.png`;
  await writeFile(png, await photo('phone-IMG_20180725_163423.jpg', edge));
  await exec('convert', [png, '-dither', 'FloydSteinberg', '-colors', '64', '-type', 'Palette', '-compress', 'LZW', `TIFF:${path}`]);
  return path;
}

/**
 * An AVIF like those of early encoders: its `colr` property says full range with unspecified
 * primaries, transfer and matrix (2/2/2), its AV1 bitstream says limited range. Made with libavif's
 * avifenc (limited range throughout), then the `colr` range flag set.
 */
export async function rangeMismatchAvif(path: string, edge = 640): Promise<string> {
  const png = `${path}.png`;
  await writeFile(png, await photo('jpeg420exif.jpg', edge));
  await exec('avifenc', ['--speed', '8', '--min', '20', '--max', '30', '--range', 'limited', '--cicp', '2/2/2', png, path]);
  const avif = await readFile(path);
  const nclx = avif.indexOf('colrnclx', 0, 'latin1');
  if (nclx < 0) throw new Error('avifenc wrote no nclx colour property');
  avif[nclx + 14] |= 0x80;
  await writeFile(path, avif);
  return path;
}

/**
 * A copy of an Office package with its media parts' bytes replaced (same part names, so every
 * relationship and content type stays valid).
 */
export async function withMedia(template: string, out: string, media: Record<string, Buffer>): Promise<string> {
  const zip = await yauzl.openPromise(template, { lazyEntries: true, autoClose: false });
  const next = new yazl.ZipFile();
  for await (const e of zip.eachEntry()) {
    const chunks: Buffer[] = [];
    for await (const c of await zip.openReadStreamPromise(e)) chunks.push(c as Buffer);
    next.addBuffer(media[e.fileName] ?? Buffer.concat(chunks), e.fileName, { compress: true, mtime: e.getLastModDate() });
  }
  zip.close();
  next.end();
  const chunks: Buffer[] = [];
  for await (const c of next.outputStream) chunks.push(c as Buffer);
  await writeFile(out, Buffer.concat(chunks));
  return out;
}

/**
 * A photo album: three full-slide camera photos exported at quality 92–97, more pixels than the
 * slide shows.
 */
export async function photoAlbumPptx(out: string, edge = 2400): Promise<string> {
  return withMedia(`${corpus}pptx/derived-photo-slides-from-pdf.pptx`, out, {
    'ppt/media/image1.jpeg': await sharp(await photo('canon-dslr.jpg', edge)).jpeg({ quality: 97 }).toBuffer(),
    'ppt/media/image2.jpeg': await sharp(await photo('phone-IMG_20180725_163423.jpg', edge)).jpeg({ quality: 92 }).toBuffer(),
    'ppt/media/image3.jpeg': await sharp(await photo('craft-beer.jpg', edge)).jpeg({ quality: 95, chromaSubsampling: '4:4:4' }).toBuffer(),
  });
}

/** A short document with a screenshot-like PNG of a photo and a camera JPEG inline. */
export async function inlineImagesDocx(out: string, edge = 1200): Promise<string> {
  return withMedia(`${corpus}docx/python-docx-inline-shapes.docx`, out, {
    'word/media/image1.png': await sharp(await photo('jpeg420exif.jpg', edge)).png().toBuffer(),
    'word/media/image2.jpeg': await sharp(await photo('baiona_cmyk.jpg', edge)).toColourspace('srgb').jpeg({ quality: 88 }).toBuffer(),
  });
}
