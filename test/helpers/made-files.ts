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
import { PDFDocument } from 'pdf-lib';
import { unzip } from './zip.ts';

const exec = promisify(execFile);
const corpus = new URL('../../../shared/corpus/', import.meta.url).pathname;

/** A corpus photo scaled so its longer edge is `edge` pixels, as lossless PNG bytes. */
export async function photo(name: string, edge: number): Promise<Buffer> {
  return sharp(`${corpus}jpg/${name}`).rotate().resize(edge, edge, { fit: 'inside' }).png({ compressionLevel: 1 }).toBuffer();
}

/**
 * A screenshot of an application window, the commonest PNG there is: flat panels, anti-aliased text
 * in several colours, thin rules, a gradient card with rounded corners and a soft shadow (rendered
 * from SVG by librsvg with the system's fonts). A palette quantised at a low quality dithers the
 * gradient into noise that deflates badly; one at a high quality keeps it smooth and smaller.
 */
export async function screenshotPng(path: string, width = 1280, height = 800): Promise<string> {
  const rows = ['j_81f2  IMG_2682.heic  Succeeded  39 %', 'j_81f3  report.pdf  Running', 'j_81f4  slides.pptx  Failed', 'j_81f5  album.pptx  Queued'];
  const text = (x: number, y: number, size: number, fill: string, body: string, weight = 'normal') =>
    `<text x="${x}" y="${y}" font-family="DejaVu Sans" font-size="${size}" font-weight="${weight}" fill="${fill}">${body}</text>`;
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}">
  <defs>
    <linearGradient id="g" x1="0" x2="1"><stop offset="0" stop-color="#ff7e5f"/><stop offset="0.35" stop-color="#feb47b"/><stop offset="0.7" stop-color="#86a8e7"/><stop offset="1" stop-color="#91eae4"/></linearGradient>
    <filter id="s" x="-10%" y="-10%" width="120%" height="130%"><feGaussianBlur stdDeviation="6"/></filter>
  </defs>
  <rect width="100%" height="100%" fill="#f4f6f8"/>
  <rect width="100%" height="48" fill="#24292f"/>${text(24, 31, 18, '#ffffff', 'compressd · Dashboard')}${text(width - 170, 31, 16, '#d0d7de', 'Settings   Logout')}
  <rect y="48" width="252" height="${height - 48}" fill="#ffffff"/><rect x="252" y="48" width="1" height="${height - 48}" fill="#d0d7de"/>
  ${['Jobs', 'Accounts', 'API keys', 'Webhooks', 'Usage'].map((t, i) => text(16, 86 + i * 32, 16, '#1f2328', t)).join('')}${text(16, 246, 16, '#0969da', 'Documentation')}
  ${text(277, 114, 26, '#1f2328', 'Recent jobs', 'bold')}
  <rect x="277" y="140" width="${width - 301}" height="24" fill="#eaeef2"/>
  ${rows.map((r, i) => text(280, 182 + i * 22, 15, ['#1a7f37', '#9a6700', '#cf222e', '#57606a'][i], r)).join('')}
  ${[0, 1, 2].map((i) => text(277, 290 + i * 19, 15, '#444c56', 'Lorem ipsum dolor sit amet, consectetur adipiscing elit. Integer nec odio. Praesent libero.')).join('')}
  <rect x="283" y="349" width="600" height="220" rx="12" fill="#000000" opacity="0.35" filter="url(#s)"/>
  <rect x="277" y="343" width="600" height="220" rx="12" fill="url(#g)"/>
  <rect x="277" y="593" width="157" height="39" rx="6" fill="#2da44e"/>${text(297, 618, 16, '#ffffff', 'Compress files')}
</svg>`;
  await sharp(Buffer.from(svg)).png().toFile(path);
  return path;
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

// Pathological documents (issue 21: bounded work per job): many pictures whose searches add up.

/** xorshift32: a seeded generator, so every machine makes the same bytes. */
function seeded(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

const PHOTOS = ['canon-dslr.jpg', 'craft-beer.jpg', 'phone-IMG_20180725_163423.jpg', 'jpeg420exif.jpg', 'baiona_cmyk.jpg'];

/**
 * `count` different camera-like photos of width×height as JPEG at `quality` (what a camera or a
 * phone writes): crops of the corpus photos at shifting windows, so no two are the same bytes.
 */
export async function cameraPhotos(count: number, width: number, height: number, quality = 95): Promise<Buffer[]> {
  const sources = await Promise.all(PHOTOS.map((p) => sharp(`${corpus}jpg/${p}`).rotate().toColourspace('srgb').resize(width * 1.25, height * 1.25, { fit: 'cover' }).raw().toBuffer({ resolveWithObject: true })));
  const out: Buffer[] = [];
  for (let i = 0; i < count; i++) {
    const { data, info } = sources[i % sources.length];
    const step = Math.floor(i / sources.length);
    const left = (step * 37) % (info.width - width + 1);
    const top = (step * 23) % (info.height - height + 1);
    out.push(await sharp(data, { raw: { width: info.width, height: info.height, channels: info.channels } }).extract({ left, top, width, height }).jpeg({ quality }).toBuffer());
  }
  return out;
}

/**
 * `count` pages of a grey text document as one flatbed scanner writes them: letter size at `dpi`,
 * lines of text, paper grain and sensor noise, all JPEG at the same quality (the
 * same quantisation tables on every page, as from one scanner).
 */
export async function scannedPages(count: number, dpi: number, quality = 85): Promise<Buffer[]> {
  const [width, height] = [Math.round(8.5 * dpi), Math.round(11 * dpi)];
  const out: Buffer[] = [];
  for (let page = 0; page < count; page++) {
    const random = seeded(1000 + page);
    const line = dpi / 6;
    const letters = 'etaoinshrdlcumwfgypbvk';
    let svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}"><rect width="100%" height="100%" fill="#f4f1ea"/><g fill="#1c1c1c" font-family="DejaVu Serif, serif" font-size="${(line * 0.55).toFixed(1)}">`;
    for (let y = dpi * 1.2; y < height - dpi; y += line) {
      let text = '';
      while (text.length < 70) text += `${Array.from({ length: 2 + Math.floor(random() * 8) }, () => letters[Math.floor(random() * letters.length)]).join('')} `;
      svg += `<text x="${dpi}" y="${y.toFixed(1)}">${text.trim()}</text>`;
    }
    svg += '</g></svg>';
    const { data } = await sharp(Buffer.from(svg)).greyscale().blur(0.6).raw().toBuffer({ resolveWithObject: true });
    for (let i = 0; i < data.length; i++) data[i] = Math.max(0, Math.min(255, data[i] + Math.round((random() - 0.5) * 12)));
    out.push(await sharp(data, { raw: { width, height, channels: 1 } }).toColourspace('b-w').jpeg({ quality }).toBuffer());
  }
  return out;
}

/** `count` small pictures (icons, thumbnails) of `edge` pixels as PNG: photo crops, every one different. */
export async function tinyPictures(count: number, edge = 48): Promise<Buffer[]> {
  const { data, info } = await sharp(`${corpus}jpg/craft-beer.jpg`).resize(1024, 1024, { fit: 'cover' }).removeAlpha().raw().toBuffer({ resolveWithObject: true });
  const out: Buffer[] = [];
  const perRow = Math.floor(info.width / edge);
  for (let i = 0; i < count; i++) {
    const cell = i % (perRow * perRow);
    const shift = Math.floor(i / (perRow * perRow));
    const left = Math.min(info.width - edge, (cell % perRow) * edge + shift);
    const top = Math.min(info.height - edge, Math.floor(cell / perRow) * edge + shift);
    out.push(await sharp(data, { raw: { width: info.width, height: info.height, channels: 3 } }).extract({ left, top, width: edge, height: edge }).png().toBuffer());
  }
  return out;
}

/**
 * A PDF with one picture per page, drawn over the whole letter-size page (a scan, an img2pdf
 * album). JPEGs are stored as they are (DCTDecode); PNGs as Flate samples. With `perPage` > 1
 * the pictures are laid out in a grid, several to a page (a contact sheet of small pictures).
 */
export async function picturesPdf(out: string, pictures: Buffer[], perPage = 1): Promise<string> {
  const doc = await PDFDocument.create();
  const [pw, ph] = [612, 792];
  const cols = Math.ceil(Math.sqrt(perPage));
  for (let i = 0; i < pictures.length; i += perPage) {
    const page = doc.addPage([pw, ph]);
    for (let k = 0; k < perPage && i + k < pictures.length; k++) {
      const bytes = pictures[i + k];
      const image = bytes[0] === 0xff ? await doc.embedJpg(bytes) : await doc.embedPng(bytes);
      if (perPage === 1) page.drawImage(image, { x: 0, y: 0, width: pw, height: ph });
      else {
        const cell = pw / cols;
        page.drawImage(image, { x: (k % cols) * cell, y: ph - (Math.floor(k / cols) + 1) * cell, width: cell * 0.9, height: cell * 0.9 });
      }
    }
    page.drawText(`Page ${i / perPage + 1}`, { x: 40, y: 20, size: 10 });
  }
  await writeFile(out, await doc.save());
  return out;
}

/** A zip package written from named parts, in order, every entry deflated. */
async function writeZip(out: string, parts: [string, Buffer][]): Promise<string> {
  const zip = new yazl.ZipFile();
  for (const [name, data] of parts) zip.addBuffer(data, name, { compress: true, mtime: new Date('2026-01-01T00:00:00Z') });
  zip.end();
  const chunks: Buffer[] = [];
  for await (const c of zip.outputStream) chunks.push(c as Buffer);
  await writeFile(out, Buffer.concat(chunks));
  return out;
}


const extOf = (data: Buffer): string => (data[0] === 0xff ? 'jpeg' : 'png');
const IMAGE_REL = 'http://schemas.openxmlformats.org/officeDocument/2006/relationships/image';

/** Content types with a Default for every picture extension used. */
function withDefaults(types: string, exts: Iterable<string>): string {
  const mime: Record<string, string> = { jpeg: 'image/jpeg', png: 'image/png' };
  for (const ext of exts) if (!types.includes(`Extension="${ext}"`)) types = types.replace('<Default ', `<Default Extension="${ext}" ContentType="${mime[ext]}"/><Default `);
  return types;
}

/**
 * A photo-album PPTX: one slide per picture, each shown over the whole slide (the corpus album's
 * slide, cloned), every picture its own media part.
 */
export async function albumPptx(out: string, pictures: Buffer[]): Promise<string> {
  const t = await unzip(await readFile(`${corpus}pptx/derived-photo-slides-from-pdf.pptx`));
  const slide = t.get('ppt/slides/slide1.xml')!;
  const rels = t.get('ppt/slides/_rels/slide1.xml.rels')!.toString();
  const parts: [string, Buffer][] = [];
  let types = t.get('[Content_Types].xml')!.toString().replace(/<Override PartName="\/ppt\/slides\/slide\d+\.xml"[^>]*\/>/g, '');
  const slideType = 'application/vnd.openxmlformats-officedocument.presentationml.slide+xml';
  let presRels = t.get('ppt/_rels/presentation.xml.rels')!.toString().replace(/<Relationship Id="rId\d+" Type="[^"]*\/slide" Target="slides\/slide\d+\.xml"\/>/g, '');
  let ids = '';
  pictures.forEach((picture, i) => {
    const n = i + 1;
    const media = `image${n}.${extOf(picture)}`;
    parts.push([`ppt/slides/slide${n}.xml`, slide], [`ppt/slides/_rels/slide${n}.xml.rels`, Buffer.from(rels.replace(/Target="..\/media\/[^"]+"/, `Target="../media/${media}"`))], [`ppt/media/${media}`, picture]);
    types = types.replace('</Types>', `<Override PartName="/ppt/slides/slide${n}.xml" ContentType="${slideType}"/></Types>`);
    presRels = presRels.replace('</Relationships>', `<Relationship Id="rIdS${n}" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/slide" Target="slides/slide${n}.xml"/></Relationships>`);
    ids += `<p:sldId id="${256 + i}" r:id="rIdS${n}"/>`;
  });
  const presentation = t.get('ppt/presentation.xml')!.toString().replace(/<p:sldIdLst>.*<\/p:sldIdLst>/, `<p:sldIdLst>${ids}</p:sldIdLst>`);
  const kept = [...t].filter(([name]) => !/^ppt\/(slides|media)\//.test(name) && !['[Content_Types].xml', 'ppt/presentation.xml', 'ppt/_rels/presentation.xml.rels'].includes(name));
  return writeZip(out, [
    ['[Content_Types].xml', Buffer.from(withDefaults(types, pictures.map(extOf)))],
    ...kept,
    ['ppt/presentation.xml', Buffer.from(presentation)],
    ['ppt/_rels/presentation.xml.rels', Buffer.from(presRels)],
    ...parts,
  ]);
}

/**
 * A DOCX report: a heading, one inline picture `widthInches` wide and a caption per picture (the
 * corpus report's figure, cloned), every picture its own media part.
 */
export async function reportDocx(out: string, pictures: Buffer[], widthInches = 6): Promise<string> {
  const t = await unzip(await readFile(`${corpus}docx/derived-photo-report.docx`));
  const doc = t.get('word/document.xml')!.toString();
  const head = doc.slice(0, doc.indexOf('<w:body>') + '<w:body>'.length);
  const tail = doc.slice(doc.lastIndexOf('<w:sectPr'));
  let rels = t.get('word/_rels/document.xml.rels')!.toString().replace(/<Relationship Id="rId\d+" Type="[^"]*\/image" Target="media\/[^"]+"\/>/g, '');
  const media: [string, Buffer][] = [];
  const relationships: string[] = [];
  // A picture repeated (thousands of one icon) is read once.
  const metas = new Map<Buffer, Awaited<ReturnType<ReturnType<typeof sharp>['metadata']>>>();
  let body = '<w:p><w:pPr><w:pStyle w:val="Title"/></w:pPr><w:r><w:t>Site survey</w:t></w:r></w:p>';
  for (const [i, picture] of pictures.entries()) {
    const n = i + 1;
    const meta = metas.get(picture) ?? (await sharp(picture).metadata());
    metas.set(picture, meta);
    const cx = Math.round(widthInches * 914400);
    const cy = Math.round((cx * (meta.height ?? 1)) / (meta.width ?? 1));
    const name = `image${n}.${extOf(picture)}`;
    media.push([`word/media/${name}`, picture]);
    relationships.push(`<Relationship Id="rIdP${n}" Type="${IMAGE_REL}" Target="media/${name}"/>`);
    body +=
      `<w:p><w:pPr><w:pStyle w:val="Heading2"/></w:pPr><w:r><w:t>Figure ${n}</w:t></w:r></w:p>` +
      `<w:p><w:r><w:drawing><wp:inline xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:pic="http://schemas.openxmlformats.org/drawingml/2006/picture"><wp:extent cx="${cx}" cy="${cy}"/><wp:docPr id="${n}" name="Picture ${n}"/><wp:cNvGraphicFramePr><a:graphicFrameLocks noChangeAspect="1"/></wp:cNvGraphicFramePr><a:graphic><a:graphicData uri="http://schemas.openxmlformats.org/drawingml/2006/picture"><pic:pic><pic:nvPicPr><pic:cNvPr id="0" name="${name}"/><pic:cNvPicPr/></pic:nvPicPr><pic:blipFill><a:blip r:embed="rIdP${n}"/><a:stretch><a:fillRect/></a:stretch></pic:blipFill><pic:spPr><a:xfrm><a:off x="0" y="0"/><a:ext cx="${cx}" cy="${cy}"/></a:xfrm><a:prstGeom prst="rect"/></pic:spPr></pic:pic></a:graphicData></a:graphic></wp:inline></w:drawing></w:r></w:p>` +
      `<w:p><w:r><w:t>Figure ${n}: observed conditions.</w:t></w:r></w:p>`;
  }
  rels = rels.replace('</Relationships>', `${relationships.join('')}</Relationships>`);
  const kept = [...t].filter(([name]) => !name.startsWith('word/media/') && !['[Content_Types].xml', 'word/document.xml', 'word/_rels/document.xml.rels'].includes(name));
  return writeZip(out, [
    ['[Content_Types].xml', Buffer.from(withDefaults(t.get('[Content_Types].xml')!.toString(), pictures.map(extOf)))],
    ...kept,
    ['word/document.xml', Buffer.from(head + body + tail)],
    ['word/_rels/document.xml.rels', Buffer.from(rels)],
    ...media,
  ]);
}

// Files with the properties of issue 30 (one door for every image).

/**
 * An ICC profile of `bytes` bytes that converts like the Display P3 profile libvips ships: P3's
 * own tags plus one private tag of padding, the size of the large LUT-based profiles some scanner
 * and print software embed. A JPEG carries it in many APP2 segments (64 KB each).
 */
export async function paddedP3Profile(bytes: number): Promise<Buffer> {
  const p3 = (await sharp({ create: { width: 1, height: 1, channels: 3, background: '#808080' } }).withIccProfile('p3').jpeg().toBuffer().then((j) => sharp(j).metadata())).icc!;
  const count = p3.readUInt32BE(128);
  const table = 132 + count * 12;
  const pad = Math.max(0, bytes - p3.length - 12);
  const out = Buffer.alloc(p3.length + 12 + pad);
  p3.copy(out, 0, 0, 128);
  out.writeUInt32BE(count + 1, 128);
  for (let i = 0; i < count; i++) {
    const at = 132 + i * 12;
    p3.copy(out, at, at, at + 12);
    out.writeUInt32BE(p3.readUInt32BE(at + 4) + 12, at + 4);
  }
  out.write('pad ', table, 'latin1');
  out.writeUInt32BE(p3.length + 12, table + 4);
  out.writeUInt32BE(pad, table + 8);
  p3.copy(out, table + 12, table);
  out.writeUInt32BE(out.length, 0);
  out.fill(0, 84, 100);
  return out;
}

/**
 * A small photo (200×130, about 20 KB of image data) with an embedded profile: `profileBytes`
 * large (1.6 MB by default: the profile costs far more than the picture), or the plain Display P3
 * profile (`profileBytes` 0: a few hundred bytes, a profile to keep).
 */
export async function profiledSmallJpeg(path: string, profileBytes = 1_600_000): Promise<string> {
  const icc = `${path}.icc`;
  const profile = profileBytes > 0 ? await paddedP3Profile(profileBytes) : null;
  if (profile) await writeFile(icc, profile);
  const pixels = sharp(await photo('craft-beer.jpg', 200)).resize(200, 130, { fit: 'cover' });
  await pixels.withIccProfile(profile ? icc : 'p3').jpeg({ quality: 92 }).toFile(path);
  return path;
}

/**
 * Grey pictures stored as colour (R = G = B): a black-and-white photo and a grey text scan as
 * three-component JPEGs, and an 8×8 grey 24-bit BMP.
 */
export async function greyPictures(dir: string): Promise<{ photo: string; scan: string; bmp: string }> {
  const paths = { photo: join(dir, 'grey-photo.jpg'), scan: join(dir, 'grey-scan.jpg'), bmp: join(dir, 'grey-8x8.bmp') };
  await sharp(await photo('canon-dslr.jpg', 1200)).greyscale().toColourspace('srgb').jpeg({ quality: 92 }).toFile(paths.photo);
  const [scan] = await scannedPages(1, 100, 90);
  await sharp(scan).toColourspace('srgb').jpeg({ quality: 90, chromaSubsampling: '4:4:4' }).toFile(paths.scan);
  await exec('convert', ['-size', '8x8', 'gradient:gray20-gray90', '-type', 'TrueColor', `BMP3:${paths.bmp}`]);
  return paths;
}

/**
 * A small, mostly-XML DOCX (about 20 KB): a few pages of styled paragraphs (Word's run markup, as
 * Word writes it) with two small inline pictures, a JPEG and a PNG; parts deflated at zlib's
 * default level, as most writers do.
 */
export async function smallXmlDocx(out: string): Promise<string> {
  const t = await unzip(await readFile(`${corpus}docx/python-docx-inline-shapes.docx`));
  const jpeg = await sharp(await photo('craft-beer.jpg', 120)).jpeg({ quality: 90 }).toBuffer();
  const png = await sharp(await photo('jpeg420exif.jpg', 64)).png().toBuffer();
  const random = seeded(30);
  const words = 'the of survey site report water level measured north south bank erosion sample station observed flow'.split(' ');
  const sentence = () => Array.from({ length: 8 + Math.floor(random() * 10) }, () => words[Math.floor(random() * words.length)]).join(' ');
  const run = (text: string, bold = false) => `<w:r><w:rPr><w:rFonts w:ascii="Calibri" w:hAnsi="Calibri" w:cs="Calibri"/>${bold ? '<w:b/>' : ''}<w:sz w:val="22"/><w:szCs w:val="22"/><w:lang w:val="en-GB"/></w:rPr><w:t xml:space="preserve">${text} </w:t></w:r>`;
  const para = () => `<w:p w:rsidR="00A1${Math.floor(random() * 9000 + 1000)}" w:rsidRDefault="00B2C3D4"><w:pPr><w:spacing w:after="120"/><w:jc w:val="both"/></w:pPr>${Array.from({ length: 3 }, (_, i) => run(sentence(), i === 0 && random() < 0.2)).join('')}</w:p>`;
  const picture = (n: number, cx: number, cy: number) =>
    `<w:p><w:r><w:drawing><wp:inline><wp:extent cx="${cx}" cy="${cy}"/><wp:docPr id="${n}" name="Picture ${n}"/><a:graphic xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"><a:graphicData uri="http://schemas.openxmlformats.org/drawingml/2006/picture"><pic:pic xmlns:pic="http://schemas.openxmlformats.org/drawingml/2006/picture"><pic:nvPicPr><pic:cNvPr id="${n}" name="image${n}"/><pic:cNvPicPr/></pic:nvPicPr><pic:blipFill><a:blip r:embed="rIdP${n}"/><a:stretch><a:fillRect/></a:stretch></pic:blipFill><pic:spPr><a:xfrm><a:off x="0" y="0"/><a:ext cx="${cx}" cy="${cy}"/></a:xfrm><a:prstGeom prst="rect"/></pic:spPr></pic:pic></a:graphicData></a:graphic></wp:inline></w:drawing></w:r></w:p>`;
  const body = [...Array.from({ length: 30 }, para), picture(1, 2011680, 1371600), ...Array.from({ length: 30 }, para), picture(2, 1005840, 1371600), ...Array.from({ length: 20 }, para)].join('');
  const document = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing"><w:body>${body}<w:sectPr><w:pgSz w:w="11906" w:h="16838"/><w:pgMar w:top="1440" w:right="1440" w:bottom="1440" w:left="1440" w:header="708" w:footer="708" w:gutter="0"/></w:sectPr></w:body></w:document>`;
  const rels = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rIdS" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/styles" Target="styles.xml"/><Relationship Id="rIdP1" Type="${IMAGE_REL}" Target="media/image1.jpeg"/><Relationship Id="rIdP2" Type="${IMAGE_REL}" Target="media/image2.png"/></Relationships>`;
  const types = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Default Extension="jpeg" ContentType="image/jpeg"/><Default Extension="png" ContentType="image/png"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/><Override PartName="/word/styles.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.styles+xml"/></Types>`;
  const rootRels = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>`;
  return writeZip(out, [
    ['[Content_Types].xml', Buffer.from(types)],
    ['_rels/.rels', Buffer.from(rootRels)],
    ['word/document.xml', Buffer.from(document)],
    ['word/_rels/document.xml.rels', Buffer.from(rels)],
    ['word/styles.xml', t.get('word/styles.xml')!],
    ['word/media/image1.jpeg', jpeg],
    ['word/media/image2.png', png],
  ]);
}

/** A photo-album PPTX of four large camera photos (2400×1600, JPEG quality 95), about 4 MB. */
export async function fourPhotoAlbumPptx(out: string): Promise<string> {
  return albumPptx(out, await cameraPhotos(4, 2400, 1600, 95));
}

/** A photo with a soft transparent vignette, as a PNG at `png`. */
async function vignettedPng(png: string, edge: number): Promise<void> {
  const rgb = await sharp(await photo('phone-IMG_20180725_163423.jpg', edge)).removeAlpha().raw().toBuffer({ resolveWithObject: true });
  const { width, height } = rgb.info;
  const mask = await sharp(Buffer.from(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}"><defs><radialGradient id="v"><stop offset="0.6" stop-color="#fff"/><stop offset="1" stop-color="#000"/></radialGradient></defs><rect width="100%" height="100%" fill="url(#v)"/></svg>`))
    .removeAlpha()
    .extractChannel(0)
    .raw()
    .toBuffer();
  const rgba = Buffer.alloc(width * height * 4);
  for (let i = 0; i < width * height; i++) {
    rgb.data.copy(rgba, i * 4, i * 3, i * 3 + 3);
    rgba[i * 4 + 3] = mask[i];
  }
  await sharp(rgba, { raw: { width, height, channels: 4 } }).png().toFile(png);
}

/**
 * A 10-bit 4:4:4 AVIF with alpha (a photo with a soft transparent vignette), made with avifenc,
 * like the HDR-capable phone and editor exports.
 */
export async function tenBitAlphaAvif(path: string, edge = 1070): Promise<string> {
  const png = `${path}.png`;
  await vignettedPng(png, edge);
  await exec('avifenc', ['--speed', '8', '--depth', '10', '--yuv', '444', '--min', '10', '--max', '20', png, path]);
  return path;
}

/** The same vignetted photo as a 10-bit AVIF in the Display P3 profile, embedded (made with avifenc), as wide-gamut editors export it. */
export async function tenBitP3Avif(path: string, edge = 640): Promise<string> {
  const [png, icc] = [`${path}.png`, `${path}.icc`];
  await vignettedPng(png, edge);
  await writeFile(icc, await paddedP3Profile(0));
  await exec('avifenc', ['--speed', '8', '--depth', '10', '--min', '10', '--max', '20', '--icc', icc, png, path]);
  return path;
}

/** The same vignetted photo as a 10-bit 4:2:0 HEIC with an alpha plane, made with libheif's heif-enc (x265). */
export async function tenBitAlphaHeic(path: string, edge = 700): Promise<string> {
  const png = `${path}.png`;
  await vignettedPng(png, edge);
  await exec('heif-enc', ['-b', '10', '-q', '80', '-o', path, png]);
  return path;
}
