// Decompression bombs and hostile containers made on the fly: small files that declare or
// inflate to gigapixels and gigabytes, in every container the service reads.
import { createDeflate, deflateSync } from 'node:zlib';
import yauzl from 'yauzl';
import yazl from 'yazl';
import { pngChunk } from '../../workers/image/png-chunks.ts';

/** One GiB of zero bytes, zlib-compressed (about 1 MB). */
export async function gigabyteOfZeros(): Promise<Buffer> {
  const deflate = createDeflate({ level: 9 });
  const out: Buffer[] = [];
  deflate.on('data', (c: Buffer) => out.push(c));
  const ended = new Promise((r) => deflate.on('end', r));
  const mb = Buffer.alloc(1 << 20);
  for (let i = 0; i < 1024; i++) if (!deflate.write(mb)) await new Promise((r) => deflate.once('drain', r));
  deflate.end();
  await ended;
  return Buffer.concat(out);
}

/** A grey 8-bit PNG of `width`×`height` whose IDAT is `idat` (zlib data). */
export function png(width: number, height: number, idat: Buffer): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 0; // greyscale
  return Buffer.concat([Buffer.from('89504e470d0a1a0a', 'hex'), pngChunk('IHDR', ihdr), pngChunk('IDAT', idat), pngChunk('IEND', Buffer.alloc(0))]);
}

/** 32767×32768 grey pixels: exactly one GiB once inflated (a filter byte per row). */
export const pngInflateBomb = (zeros1G: Buffer) => png(32767, 32768, zeros1G);

/** 100000×100000 declared, one row of data. */
export const pngDeclaredBomb = () => png(100_000, 100_000, deflateSync(Buffer.alloc(100_001)));

/** A GIF whose screen and single frame declare 65535×65535 pixels, with a three-code LZW stream. */
export function gifDeclaredBomb(): Buffer {
  const screen = Buffer.from([0xff, 0xff, 0xff, 0xff, 0x80, 0, 0]);
  const palette = Buffer.from([0, 0, 0, 255, 255, 255]);
  const frame = Buffer.from([0x2c, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0x02, 0x02, 0x44, 0x01, 0x00, 0x3b]);
  return Buffer.concat([Buffer.from('GIF89a', 'latin1'), screen, palette, frame]);
}

/** A little-endian TIFF of 32767×32768 grey pixels in one Deflate strip that inflates to 1 GiB. */
export function tiffInflateBomb(zeros1G: Buffer): Buffer {
  const entries: [tag: number, type: number, value: number][] = [
    [256, 4, 32767], // ImageWidth
    [257, 4, 32768], // ImageLength
    [258, 3, 8], // BitsPerSample
    [259, 3, 8], // Compression: Deflate
    [262, 3, 1], // Photometric: BlackIsZero
    [273, 4, 0], // StripOffsets (patched below)
    [277, 3, 1], // SamplesPerPixel
    [278, 4, 32768], // RowsPerStrip
    [279, 4, zeros1G.length], // StripByteCounts
  ];
  const ifdSize = 2 + entries.length * 12 + 4;
  const dataAt = 8 + ifdSize;
  const head = Buffer.alloc(dataAt);
  head.write('II', 0, 'latin1');
  head.writeUInt16LE(42, 2);
  head.writeUInt32LE(8, 4);
  head.writeUInt16LE(entries.length, 8);
  entries.forEach(([tag, type, value], i) => {
    const at = 10 + i * 12;
    head.writeUInt16LE(tag, at);
    head.writeUInt16LE(type, at + 2);
    head.writeUInt32LE(1, at + 4);
    if (type === 3) head.writeUInt16LE(value, at + 8);
    else head.writeUInt32LE(tag === 273 ? dataAt : value, at + 8);
  });
  return Buffer.concat([head, zeros1G]);
}

/** A lossless WebP declaring 16384×16384 pixels followed by noise. */
export function webpDeclaredBomb(): Buffer {
  const vp8l = Buffer.alloc(5 + 64, 0x55);
  vp8l[0] = 0x2f;
  // 14 bits width-1, 14 bits height-1, 1 bit alpha, 3 bits version 0.
  const bits = 16383 | (16383 << 14) | (1 << 28);
  vp8l.writeUInt32LE(bits >>> 0, 1);
  const chunk = Buffer.concat([Buffer.from('VP8L', 'latin1'), u32le(vp8l.length), vp8l]);
  return Buffer.concat([Buffer.from('RIFF', 'latin1'), u32le(4 + chunk.length), Buffer.from('WEBP', 'latin1'), chunk]);
}

function u32le(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n, 0);
  return b;
}

/** A one-page PDF built from raw objects, with a correct cross-reference table. */
function pdf(objects: (string | Buffer)[]): Buffer {
  const parts: Buffer[] = [Buffer.from('%PDF-1.7\n%\xe2\xe3\xcf\xd3\n', 'latin1')];
  let size = parts[0]!.length;
  const offsets: number[] = [];
  objects.forEach((body, i) => {
    offsets.push(size);
    const obj = Buffer.concat([Buffer.from(`${i + 1} 0 obj\n`), Buffer.from(body as string, typeof body === 'string' ? 'latin1' : undefined), Buffer.from('\nendobj\n')]);
    parts.push(obj);
    size += obj.length;
  });
  const xref = `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n${offsets.map((o) => `${String(o).padStart(10, '0')} 00000 n \n`).join('')}trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${size}\n%%EOF\n`;
  return Buffer.concat([...parts, Buffer.from(xref)]);
}

const stream = (dict: string, data: Buffer) => Buffer.concat([Buffer.from(`<< ${dict} /Length ${data.length} >>\nstream\n`), data, Buffer.from('\nendstream')]);

/** A PDF whose page content stream is deflated twice: 2 KB that inflate to 1 GiB. */
export function pdfContentBomb(zeros1G: Buffer): Buffer {
  return pdf([
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>',
    stream('/Filter [/FlateDecode /FlateDecode]', deflateSync(zeros1G, { level: 9 })),
  ]);
}

/** A PDF whose page content is one Flate stream of about 1 MB that inflates to 1 GiB. */
export function pdfPageStreamBomb(zeros1G: Buffer): Buffer {
  return pdf([
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>',
    stream('/Filter /FlateDecode', zeros1G),
  ]);
}

/** A PDF drawing a 32767×32768 grey image whose stream inflates to 1 GiB. */
export function pdfImageBomb(zeros1G: Buffer): Buffer {
  return pdf([
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /XObject << /Im1 5 0 R >> >> >>',
    stream('', Buffer.from('q 612 0 0 792 0 0 cm /Im1 Do Q')),
    stream('/Type /XObject /Subtype /Image /Width 32767 /Height 32768 /ColorSpace /DeviceGray /BitsPerComponent 8 /Filter /FlateDecode', zeros1G),
  ]);
}

/** A PDF whose page draws text in an embedded TrueType font whose stream inflates to 1 GiB. */
export function pdfFontBomb(zeros1G: Buffer): Buffer {
  return pdf([
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>',
    stream('', Buffer.from('BT /F1 24 Tf 72 700 Td (Hello) Tj ET')),
    '<< /Type /Font /Subtype /TrueType /BaseFont /Bomb /FirstChar 32 /LastChar 126 /FontDescriptor 6 0 R >>',
    '<< /Type /FontDescriptor /FontName /Bomb /Flags 32 /FontBBox [0 0 1000 1000] /ItalicAngle 0 /Ascent 800 /Descent -200 /CapHeight 700 /StemV 80 /FontFile2 7 0 R >>',
    stream('/Filter /FlateDecode', zeros1G),
  ]);
}

/** Rebuilds a ZIP (DOCX, PPTX) with some entries' contents replaced. */
export async function replaceInZip(zip: Buffer, replace: (name: string) => Buffer | undefined): Promise<{ data: Buffer; replaced: string[] }> {
  const entries = await new Promise<{ name: string; data: Buffer }[]>((resolve, reject) => {
    yauzl.fromBuffer(zip, { lazyEntries: true }, (err, file) => {
      if (err || !file) return reject(err);
      const found: { name: string; data: Buffer }[] = [];
      file.on('entry', (entry: yauzl.Entry) => {
        file.openReadStream(entry, (e, s) => {
          if (e || !s) return reject(e);
          const chunks: Buffer[] = [];
          s.on('data', (c: Buffer) => chunks.push(c));
          s.on('error', reject);
          s.on('end', () => {
            found.push({ name: entry.fileName, data: Buffer.concat(chunks) });
            file.readEntry();
          });
        });
      });
      file.on('end', () => resolve(found));
      file.on('error', reject);
      file.readEntry();
    });
  });
  const out = new yazl.ZipFile();
  const replaced: string[] = [];
  for (const e of entries) {
    const next = replace(e.name);
    if (next) replaced.push(e.name);
    out.addBuffer(next ?? e.data, e.name);
  }
  out.end();
  const chunks: Buffer[] = [];
  for await (const c of out.outputStream) chunks.push(c as Buffer);
  return { data: Buffer.concat(chunks), replaced };
}
