// Issue 30: one door for every image. The same bytes get the same decision and the same failure
// code whichever way they arrive: the dedicated JPG/PNG/GIF compressor, the universal compressor,
// and as a picture inside a DOCX or a PDF. Issue 43: one entry, openImage, on every one of those ways. Grey pictures leave as one-component JPEGs on every
// path; a profile that costs more than the picture is converted into, a small one is kept.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { extname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { PDFDocument, PDFName, PDFRawStream } from 'pdf-lib';
import sharp from 'sharp';
import { JobError, type Compress } from '../workers/contract.ts';
import { compress as gif } from '../workers/gif.ts';
import { decodeOptions } from '../workers/image/decode-policy.ts';
import { greyOf, imageError, openImage, profileDecision, SMALL_PROFILE_BYTES, type ImageKind, type OpenAs } from '../workers/image/door.ts';
import { frameComponents } from '../workers/image/jpeg-quant.ts';
import { PERCEIVED_TARGET } from '../workers/image/perceived.ts';
import { ssimulacra2 } from '../workers/image/ssimulacra2.ts';
import { isSrgbProfile } from '../workers/image/srgb-profile.ts';
import { compress as jpg } from '../workers/jpg.ts';
import { recompressImage } from '../workers/office/media.ts';
import { compress as pdf } from '../workers/pdf.ts';
import { compress as png } from '../workers/png.ts';
import { compress as universal } from '../workers/universal.ts';
import { compress as office } from '../workers/office.ts';
import { greyPictures, picturesPdf, profiledSmallJpeg, smallXmlDocx } from './helpers/made-files.ts';

const corpus = new URL('../../shared/corpus/', import.meta.url).pathname;
const DEDICATED: Record<string, { kind: ImageKind; compress: Compress }> = {
  jpg: { kind: 'jpeg', compress: jpg },
  png: { kind: 'png', compress: png },
  gif: { kind: 'gif', compress: gif },
};

let work: string;
before(async () => {
  work = await mkdtemp(join(tmpdir(), 'image-door-test-'));
});
after(() => rm(work, { recursive: true, force: true }));

/** `ok` or the failure code of a compressor on a file. */
async function outcome(compress: Compress, path: string): Promise<{ code: string; path?: string }> {
  const dir = await mkdtemp(join(work, 'job-'));
  try {
    const r = await compress({ inputPath: path, format: extname(path).slice(1), options: {} }, { dir }, { signal: new AbortController().signal, progress: () => {} });
    return { code: 'ok', path: r.path };
  } catch (err) {
    assert.ok(err instanceof JobError, `expected a JobError, got ${String(err)}`);
    return { code: err.code };
  }
}

/** The ways in: the dedicated compressor's (its format, every frame of a GIF), the universal compressor's and the previews' (the decoder table), a document picture's. */
function waysIn(path: string, kind: ImageKind): Record<string, OpenAs> {
  return {
    dedicated: { kind, animated: kind === 'gif' },
    universal: { declared: extname(path).slice(1), signal: new AbortController().signal },
    document: { embedded: true, memory: 'reserve' },
  };
}

/** openImage, then the full decode of its pipeline: `ok W×H` (one frame's size) or the failure code. */
async function decodedBy(path: string, as: OpenAs): Promise<string> {
  try {
    const { image, facts } = await openImage(path, as);
    const { info } = await image.raw().toBuffer({ resolveWithObject: true });
    const frames = 'kind' in as && as.animated ? facts.pages : 1;
    return `ok ${facts.width}×${info.height / frames}`;
  } catch (err) {
    return imageError(err).code;
  }
}

/** What a DOCX does with a picture part: `kept` (the door refused it or nothing was gained) or `re-encoded`. */
async function inDocument(path: string): Promise<string> {
  const data = await readFile(path);
  return (await recompressImage(data, null)) ? 're-encoded' : 'kept';
}

/** [file under the corpus, the one code every door gives ('ok' for a good file)]. */
const TABLE: [string, string][] = [
  ['jpg/baiona_cmyk.jpg', 'ok'],
  ['jpg/canon-dslr.jpg', 'ok'],
  ['jpg/craft-beer.jpg', 'ok'],
  ['jpg/jpeg420exif.jpg', 'ok'],
  ['jpg/phone-IMG_20180725_163423.jpg', 'ok'],
  ['png/baiona_alpha.png', 'ok'],
  ['png/baiona_colormapped.png', 'ok'],
  ['png/density_plot.png', 'ok'],
  ['png/exifr-logo-black-highres.png', 'ok'],
  ['png/linn-scan.png', 'ok'],
  ['gif/exifr-readme-animated.gif', 'ok'],
  ['gif/file-type-fixture.gif', 'ok'],
  ['gif/lena.gif', 'ok'],
  ['bad/actually-pdf.jpg', 'image.format_mismatch'],
  ['bad/bad-crc.png', 'image.decode_failed'],
  ['bad/empty.jpg', 'image.empty'],
  ['bad/huge-dimensions.png', 'image.too_many_pixels'],
  ['bad/truncated.jpg', 'image.truncated'],
];

describe('one door: the same bytes, the same decision and code on every path', () => {
  for (const [rel, code] of TABLE) {
    const path = join(corpus, rel);
    const { kind, compress } = DEDICATED[extname(rel).slice(1)];
    if (code === 'ok') {
      it(`${rel}: openImage decodes it on every way in, to the same size`, async () => {
        const ways = waysIn(path, kind);
        const [dedicated, general, document] = await Promise.all([decodedBy(path, ways.dedicated), decodedBy(path, ways.universal), decodedBy(path, ways.document)]);
        assert.match(dedicated, /^ok /);
        assert.equal(general, dedicated);
        assert.equal(document, dedicated);
      });
    } else {
      it(`${rel}: ${code} from the dedicated compressor and from the universal one; kept inside a document`, async () => {
        assert.equal((await outcome(compress, path)).code, code);
        assert.equal((await outcome(universal, path)).code, code);
        const ways = waysIn(path, kind);
        assert.equal(await decodedBy(path, ways.dedicated), code);
        assert.equal(await decodedBy(path, ways.universal), code);
        assert.equal(await inDocument(path), 'kept');
      });
    }
  }

  it('a cut file keeps image.truncated when libvips loses the reason to another thread (its one error buffer)', async () => {
    const cut = async (rel: string, keep: number) => {
      const data = await readFile(join(corpus, rel));
      const path = join(work, `cut-${keep}-${rel.replace('/', '-')}`);
      await writeFile(path, data.subarray(0, Math.floor(data.length * keep)));
      return path;
    };
    const lost = new Error('Unknown error');
    for (const rel of ['jpg/jpeg420exif.jpg', 'png/baiona_alpha.png', 'gif/lena.gif']) {
      assert.equal(imageError(lost, await cut(rel, 0.6)).code, 'image.truncated', rel);
      assert.equal(imageError(lost, join(corpus, rel)).code, 'image.decode_failed', `${rel} whole`);
    }
    assert.equal(imageError(lost).code, 'image.decode_failed');
    // Two failing decodes at once: before, 1 in 10 of them came back as 'Unknown error' (decode_failed).
    const truncated = join(corpus, 'bad/truncated.jpg');
    const badCrc = join(corpus, 'bad/bad-crc.png');
    const codes = new Set<string>();
    for (let round = 0; round < 15; round++) {
      const both = await Promise.all([outcome(jpg, truncated), outcome(png, badCrc), outcome(jpg, truncated), outcome(png, badCrc)]);
      for (const [i, { code }] of both.entries()) codes.add(`${i % 2 ? 'bad-crc' : 'truncated'} ${code}`);
    }
    assert.deepEqual([...codes].sort(), ['bad-crc image.decode_failed', 'truncated image.truncated']);
  });

  it('the strictness is one setting: warnings pass, errors and truncation fail', () => {
    assert.equal(decodeOptions().failOn, 'error');
  });
});

/** Components of every JPEG image XObject in a PDF, with its ColorSpace. */
async function pdfJpegs(path: string): Promise<{ components: number; colourSpace: string }[]> {
  const doc = await PDFDocument.load(await readFile(path));
  const out: { components: number; colourSpace: string }[] = [];
  for (const [, obj] of doc.context.enumerateIndirectObjects()) {
    if (!(obj instanceof PDFRawStream) || obj.dict.get(PDFName.of('Subtype')) !== PDFName.of('Image')) continue;
    if (String(obj.dict.get(PDFName.of('Filter'))) !== '/DCTDecode') continue;
    out.push({ components: frameComponents(Buffer.from(obj.contents)) ?? 0, colourSpace: String(obj.dict.get(PDFName.of('ColorSpace'))) });
  }
  return out;
}

describe('grey pictures are one-component JPEGs on every path', () => {
  let grey: { photo: string; scan: string; bmp: string };
  before(async () => {
    grey = await greyPictures(work);
  });
  const components = async (path: string) => (await sharp(path).metadata()).channels;

  for (const which of ['photo', 'scan'] as const) {
    it(`a black-and-white ${which} stored as colour: dedicated, universal and inside a DOCX`, async () => {
      const input = grey[which];
      assert.equal(await components(input), 3);
      const dedicated = await outcome(jpg, input);
      const general = await outcome(universal, input);
      assert.equal(await components(dedicated.path!), 1);
      assert.equal(await components(general.path!), 1);
      const inDocx = await recompressImage(await readFile(input), null);
      assert.ok(inDocx, 'the document path re-encodes it');
      assert.equal(frameComponents(inDocx.data), 1);
      assert.ok((await readFile(dedicated.path!)).length < (await readFile(input)).length, 'smaller than the colour JPEG');
    });
  }

  it('an 8×8 grey BMP: a one-component JPEG, about half the three-component one', async () => {
    const out = await outcome(universal, grey.bmp);
    assert.equal(await components(out.path!), 1);
    const { image } = await openImage(grey.bmp, { declared: 'bmp', signal: new AbortController().signal });
    const colour = await image.toColourspace('srgb').jpeg({ mozjpeg: true, quality: 90 }).toBuffer();
    assert.ok((await readFile(out.path!)).length < colour.length * 0.7, 'well under a three-component encode');
  });

  it('a grey picture stored as a colour JPEG inside a PDF becomes a DeviceGray one-component JPEG', async () => {
    const input = await picturesPdf(join(work, 'grey.pdf'), [await readFile(grey.photo)]);
    assert.deepEqual(await pdfJpegs(input), [{ components: 3, colourSpace: '/DeviceRGB' }]);
    const out = await outcome(pdf, input);
    assert.deepEqual(await pdfJpegs(out.path!), [{ components: 1, colourSpace: '/DeviceGray' }]);
  });

  it('a grey picture stored as an RGB PNG leaves the PNG compressor as a grey (or palette) PNG', async () => {
    const input = join(work, 'grey-rgb.png');
    await sharp(grey.photo).resize(400).toColourspace('srgb').png().toFile(input);
    assert.equal(await components(input), 3);
    for (const mode of ['lossless', 'lossy'] as const) {
      const dir = await mkdtemp(join(work, 'job-'));
      const r = await png({ inputPath: input, format: 'png', options: { compression: { enabled: true, mode } } }, { dir }, { signal: new AbortController().signal, progress: () => {} });
      const meta = await sharp(r.path).metadata();
      assert.ok(meta.channels === 1 || meta.isPalette, `${mode}: ${meta.channels} channels`);
    }
  });

  it('grey detection allows the decoder rounding (one code value), not colour', () => {
    const px = (data: number[]) => ({ data: Uint8Array.from(data), width: data.length / 3, height: 1, channels: 3 });
    assert.deepEqual([...greyOf(px([10, 10, 10, 200, 201, 200]))!.data], [10, 201]);
    assert.equal(greyOf(px([10, 10, 10, 200, 202, 200])), undefined);
    assert.equal(greyOf(px([200, 201, 200]), 0), undefined);
    // An exact grey is its own luma, at every value.
    const ramp = px(Array.from({ length: 256 * 3 }, (_, i) => Math.floor(i / 3)));
    assert.deepEqual([...greyOf(ramp, 0)!.data], Array.from({ length: 256 }, (_, v) => v));
  });
});

describe('embedded ICC profiles', () => {
  it('a 1.6 MB profile on a 200×130 picture is converted into sRGB: the JPG is a few KB, no profile, same look', async () => {
    const input = await profiledSmallJpeg(join(work, 'huge-icc.jpg'));
    const before = await sharp(input).metadata();
    assert.ok(before.icc && before.icc.length > 1_500_000);
    const out = await outcome(jpg, input);
    const bytes = await readFile(out.path!);
    assert.ok(bytes.length < 20_000, `${bytes.length} bytes`);
    const after = await sharp(bytes).metadata();
    assert.equal(after.icc, undefined);
    // Seen on an sRGB screen, the output shows what the input showed, to the JPEG target.
    const shown = async (b: Buffer | string) => {
      const { data, info } = await sharp(b).toColourspace('srgb').raw().toBuffer({ resolveWithObject: true });
      return { data, width: info.width, height: info.height, channels: info.channels };
    };
    assert.ok(ssimulacra2(await shown(input), await shown(bytes)) >= PERCEIVED_TARGET - 1);
  });

  it('the Display P3 profile (480 bytes) is kept', async () => {
    const input = await profiledSmallJpeg(join(work, 'p3.jpg'), 0);
    const icc = (await sharp(input).metadata()).icc!;
    assert.ok(icc.length < SMALL_PROFILE_BYTES);
    const out = await outcome(jpg, input);
    assert.deepEqual((await sharp(out.path!).metadata()).icc, icc);
    assert.equal((await profileDecision(sharp(input), icc, (await readFile(input)).length)).keep, true);
  });

  it('a picture tagged sRGB is read as stored, one tagged Display P3 through its profile', async () => {
    // Saturated greens: the sRGB IEC61966-2.1 profile cameras embed moves some of them by one code value.
    const width = 48;
    const height = 4;
    const raw = Buffer.alloc(width * height * 3);
    for (let i = 0; i < width * height; i++) raw[i * 3 + 1] = 208 + (i % width);
    const srgb = join(work, 'srgb.icc');
    await writeFile(srgb, (await sharp(join(corpus, 'jpg/craft-beer.jpg')).metadata()).icc!);
    for (const [profile, asStored] of [[srgb, true], ['p3', false]] as const) {
      const input = join(work, `tagged-${asStored ? 'srgb' : 'p3'}.png`);
      await sharp(raw, { raw: { width, height, channels: 3 } }).withIccProfile(profile).png().toFile(input);
      const stored = await sharp(input, { ignoreIcc: true }).raw().toBuffer();
      const converted = await sharp(input).toColourspace('srgb').raw().toBuffer();
      assert.notDeepEqual(stored, converted);
      const { image } = await openImage(input, { kind: 'png' });
      assert.deepEqual(await image.toColourspace('srgb').raw().toBuffer(), asStored ? stored : converted, profile);
    }
    // A document's pictures opened together with one profile share one check of it.
    const icc = await readFile(srgb);
    assert.equal(isSrgbProfile(Buffer.from(icc)), isSrgbProfile(Buffer.from(icc)));
  });

  it('a large profile on a picture larger than it is kept', async () => {
    const input = await profiledSmallJpeg(join(work, 'mid-icc.jpg'), 40_000);
    const meta = await sharp(input).metadata();
    const decision = await profileDecision(sharp(input), meta.icc, 10 * 40_000);
    assert.equal(decision.keep, true);
  });
});

describe('small documents', () => {
  it('a small XML-heavy DOCX: its small PNG becomes a clean palette, the document loses a fifth', async () => {
    const input = await smallXmlDocx(join(work, 'small.docx'));
    const png = await sharp(await readFile(join(corpus, 'jpg/jpeg420exif.jpg'))).rotate().resize(64, 64, { fit: 'inside' }).png().toBuffer();
    const palette = await recompressImage(png, null);
    assert.ok(palette && palette.data.length < png.length / 2, `${png.length} → ${palette?.data.length}`);
    assert.equal((await sharp(palette.data).metadata()).isPalette, true);
    const out = await outcome(office, input);
    const [a, b] = [(await readFile(input)).length, (await readFile(out.path!)).length];
    assert.ok(b < a * 0.8, `${a} → ${b}`);
  });
});

describe('small pictures', () => {
  it('a 64×43 photo as PNG becomes a palette at the perceived target (a small photo is not noise)', async () => {
    const input = join(work, 'tiny-photo.png');
    await sharp(join(corpus, 'jpg/jpeg420exif.jpg')).rotate().resize(64, 64, { fit: 'inside' }).png().toFile(input);
    const out = await outcome(png, input);
    const [a, b] = [await readFile(input), await readFile(out.path!)];
    assert.ok(b.length < a.length / 2, `${a.length} → ${b.length}`);
    const px = async (x: Buffer) => {
      const { data, info } = await sharp(x).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
      return { data, width: info.width, height: info.height, channels: 4 };
    };
    assert.ok(ssimulacra2(await px(a), await px(b)) >= PERCEIVED_TARGET);
  });
});
