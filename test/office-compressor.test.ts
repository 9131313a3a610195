// Issue 9: document.office-compress on the real DOCX/PPTX corpus, plus hostile containers.
import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import officeCrypto from 'officecrypto-tool';
import { SaxesParser } from 'saxes';
import sharp from 'sharp';
import yauzl from 'yauzl';
import yazl from 'yazl';
import type { JobOptions } from '../src/catalog/index.ts';
import type { CompressResult } from '../src/catalog/contract.ts';
import { compress } from '../workers/office.ts';
import { parseRels, resolveTarget, sourceOfRels } from '../workers/office/opc.ts';
import { PERCEIVED_TARGET } from '../workers/image/perceived.ts';
import { ssimulacra2 } from '../workers/image/ssimulacra2.ts';
import { FULL_PROBES, REUSE_PROBES, SEARCHED_PER_CLASS, type DocumentPlan } from '../workers/image/budget.ts';
import { analyzePackage } from '../workers/office/analyze.ts';
import { planPictures } from '../workers/office/plan.ts';
import { openOfficePackage } from '../workers/office/package.ts';
import { rejectsWithJobError } from './helpers/job-error.ts';
import { albumPptx, cameraPhotos, inlineImagesDocx, photoAlbumPptx } from './helpers/made-files.ts';
import { plainJpegBytesAt, rgba } from './helpers/peer.ts';

const corpus = new URL('../../shared/corpus/', import.meta.url).pathname;
// The corpus plus documents made with the properties of issue 19: a photo album of camera exports
// (one at quality 95 with 4:4:4 chroma) and a document with a photo pasted as PNG.
const made = await mkdtemp(join(tmpdir(), 'office-made-'));
const album = await photoAlbumPptx(join(made, 'photo-album.pptx'), 1200);
// Issue 21: an album of many camera photos, whose searches add up past the document budget.
const longAlbum = await albumPptx(join(made, 'album-24-photos.pptx'), await cameraPhotos(24, 800, 600));
const inputs = [
  longAlbum,
  ...(await Promise.all(['docx', 'pptx'].map(async (d) => (await readdir(join(corpus, d))).map((f) => join(corpus, d, f))))).flat(),
  album,
  await inlineImagesDocx(join(made, 'inline-images.docx'), 900),
];

let work: string;
before(async () => {
  work = await mkdtemp(join(tmpdir(), 'office-test-'));
});
after(async () => {
  await rm(work, { recursive: true, force: true });
  await rm(made, { recursive: true, force: true });
});

async function run(inputPath: string, options: JobOptions = {}, dir?: string): Promise<{ result: CompressResult; phases: string[] }> {
  dir ??= await mkdtemp(join(work, 'job-'));
  const phases: string[] = [];
  const result = await compress({ inputPath, format: inputPath.split('.').pop()!, options }, { dir }, {
    signal: new AbortController().signal,
    progress: (_, phase) => {
      if (phases.at(-1) !== phase) phases.push(phase);
    },
  });
  return { result, phases };
}

/** The document budget compress applies to a package's JPEG pictures. */
async function planOf(path: string): Promise<DocumentPlan> {
  const pkg = await openOfficePackage(path);
  try {
    const signal = new AbortController().signal;
    return (await planPictures(pkg, await analyzePackage(pkg, signal), undefined, signal)).plan;
  } finally {
    pkg.zip.close();
  }
}

interface Entry {
  name: string;
  crc32: number;
  data: Buffer;
}

/** Every entry of a zip, in central-directory order, inflated (the corpus files are a few MB). */
async function entries(path: string): Promise<Entry[]> {
  const zip = await yauzl.openPromise(path, { lazyEntries: true, autoClose: false });
  const out: Entry[] = [];
  for await (const e of zip.eachEntry()) {
    const chunks: Buffer[] = [];
    if (!e.fileName.endsWith('/')) for await (const c of await zip.openReadStreamPromise(e)) chunks.push(c as Buffer);
    out.push({ name: e.fileName, crc32: e.crc32, data: Buffer.concat(chunks) });
  }
  zip.close();
  return out;
}

const isXml = (name: string) => /\.(xml|rels|vml)$/i.test(name);
const isRaster = (name: string) => /\/media\/[^/]+\.(jpe?g|png)$/i.test(name) || /thumbnail\.(jpe?g|png)$/i.test(name);

function wellFormed(xml: string, name: string): void {
  const parser = new SaxesParser();
  assert.doesNotThrow(() => parser.write(xml).close(), `${name} is well-formed XML`);
}

/** Fails with `code` and leaves nothing behind in the output directory. */
async function expectFailure(inputPath: string, code: string): Promise<void> {
  const dir = await mkdtemp(join(work, 'job-'));
  await rejectsWithJobError(run(inputPath, {}, dir), code);
  assert.deepEqual(await readdir(dir), []);
}

/** Outputs of the corpus runs with default options, reused by the tests that look closer. */
const outputs = new Map<string, string>();

describe('office compressor on the corpus', () => {
  for (const input of inputs) {
    it(`${input.startsWith(corpus) ? input.slice(corpus.length) : `made/${basename(input)}`}: same entries, valid package, never larger`, async () => {
      const { result, phases } = await run(input);
      outputs.set(input, result.path);
      assert.equal(result.format, input.split('.').pop());
      assert.ok(phases[0] === 'analyzing' && phases.at(-1) === 'finalizing', phases.join());
      const [inSize, outSize] = [(await stat(input)).size, (await stat(result.path)).size];
      assert.ok(outSize <= inSize, `${outSize} <= ${inSize}`);

      const before = await entries(input);
      const after = await entries(result.path);
      assert.equal(after[0].name, '[Content_Types].xml');
      const rest = (list: Entry[]) => list.filter((e) => e.name !== '[Content_Types].xml').map((e) => e.name);
      assert.deepEqual(rest(after), rest(before), 'every other entry, in its order');
      const media = (list: Entry[]) => list.filter((e) => /\/media\//.test(e.name)).map((e) => e.name);
      assert.deepEqual(media(after), media(before), 'media names and count');

      const original = new Map(before.map((e) => [e.name, e]));
      const names = new Set(after.map((e) => e.name.toLowerCase()));
      for (const e of after) {
        const was = original.get(e.name)!;
        if (isXml(e.name)) wellFormed(e.data.toString('utf8'), e.name);
        if (isRaster(e.name)) {
          assert.ok(e.data.length <= was.data.length, `${e.name} not larger`);
          const [m, o] = await Promise.all([sharp(e.data).metadata(), sharp(was.data).metadata()]);
          assert.equal(m.format, o.format, `${e.name} keeps its format`);
          assert.ok(m.width! <= o.width! && m.height! <= o.height!, `${e.name} not upscaled`);
        } else {
          assert.equal(e.crc32, was.crc32, `${e.name} is byte-identical`);
        }
        const source = sourceOfRels(e.name);
        if (source === null) continue;
        for (const rel of parseRels(e.data.toString('utf8'), e.name, source)) {
          if (rel.part) assert.ok(names.has(rel.part.toLowerCase()), `${e.name}: target ${rel.part} of ${rel.id} exists`);
        }
      }
    });
  }

  it('right-sizes pictures to about 220 ppi of the size they are shown at', async () => {
    // Every picture of this report is 6 in (5486400 EMU) wide on the page: 1320 px at 220 ppi.
    const input = join(corpus, 'docx/derived-photo-report.docx');
    const output = outputs.get(input) ?? (await run(input)).result.path;
    const before = new Map((await entries(input)).map((e) => [e.name, e]));
    for (const e of (await entries(output)).filter((x) => x.name.startsWith('word/media/'))) {
      const [m, o] = await Promise.all([sharp(e.data).metadata(), sharp(before.get(e.name)!.data).metadata()]);
      if (o.width! >= 1320 * 1.25) assert.ok(m.width! >= 1320 && m.width! <= 1322, `${e.name}: ${o.width} -> ${m.width}`);
      else assert.equal(m.width, o.width, `${e.name} already near its displayed size`);
    }
  });

  it('a photo album keeps no picture heavier than a plain libjpeg JPEG at the perceived quality it keeps', async () => {
    const output = outputs.get(album) ?? (await run(album)).result.path;
    const before = new Map((await entries(album)).map((e) => [e.name, e]));
    const media = (await entries(output)).filter((e) => e.name.startsWith('ppt/media/'));
    assert.equal(media.length, 3);
    for (const e of media) {
      const reference = await rgba(before.get(e.name)!.data);
      const kept = ssimulacra2(reference, await rgba(e.data));
      const peer = await plainJpegBytesAt(reference, kept);
      assert.ok(e.data.length <= peer.bytes * 1.05, `${e.name}: ours ${e.data.length} B at SSIMULACRA2 ${kept.toFixed(2)}, libjpeg q${peer.quality} ${peer.bytes} B`);
    }
  });

  it('an album of many camera photos searches less per photo, and every photo still gets smaller at the promised quality', async () => {
    const plan = await planOf(longAlbum);
    assert.notEqual(plan.level, 'full');
    assert.ok(plan.cost <= plan.budget, `${plan.cost} <= ${plan.budget}`);
    const probes = plan.searches.reduce((sum, s) => sum + Math.min(s.probes, FULL_PROBES), 0);
    assert.ok(probes <= SEARCHED_PER_CLASS * FULL_PROBES + (24 - SEARCHED_PER_CLASS) * REUSE_PROBES, `${probes} probes for 24 photos`);
    for (const file of ['docx/derived-photo-report.docx', 'pptx/derived-photo-slides-from-pdf.pptx']) assert.equal((await planOf(join(corpus, file))).level, 'full', file);

    const output = outputs.get(longAlbum) ?? (await run(longAlbum)).result.path;
    const before = new Map((await entries(longAlbum)).map((e) => [e.name, e]));
    const media = (await entries(output)).filter((e) => e.name.startsWith('ppt/media/'));
    assert.equal(media.length, 24);
    for (const e of media) {
      const original = before.get(e.name)!.data;
      assert.ok(e.data.length < original.length * 0.9, `${e.name}: ${e.data.length} B of ${original.length}`);
      // Searched on proxies within the document's budget: the target less what a proxy can miss.
      const kept = ssimulacra2(await rgba(original), await rgba(e.data));
      assert.ok(kept >= PERCEIVED_TARGET - 3, `${e.name}: SSIMULACRA2 ${kept.toFixed(2)}`);
    }
  });

  it('applies the resize option as well (50 %)', async () => {
    const input = join(corpus, 'pptx/python-pptx-shp-picture.pptx');
    const { result } = await run(input, { resize: { enabled: true, mode: 'percentage', value: 50 } });
    const before = new Map((await entries(input)).map((e) => [e.name, e]));
    const media = (await entries(result.path)).filter((e) => e.name.startsWith('ppt/media/'));
    assert.ok(media.length > 0);
    for (const e of media) {
      const [m, o] = await Promise.all([sharp(e.data).metadata(), sharp(before.get(e.name)!.data).metadata()]);
      assert.ok(Math.abs(m.width! - o.width! / 2) <= 1 && Math.abs(m.height! - o.height! / 2) <= 1, `${e.name}: ${o.width}x${o.height} -> ${m.width}x${m.height}`);
    }
  });
});

describe('office compressor on hostile input', () => {
  it('fails a zip bomb from its central directory, before inflating anything (no disk, bounded memory)', async () => {
    const rssBefore = process.memoryUsage().rss;
    await expectFailure(join(corpus, 'bad/zip-bomb.docx'), 'office.zip_bomb');
    assert.ok(process.memoryUsage().rss - rssBefore < 64 * 1024 ** 2, 'bounded memory');
  });

  it('recognises a password-protected document (CFB with an encrypted package)', async () => {
    const encrypted = await officeCrypto.encrypt(await readFile(join(corpus, 'docx/python-docx-inline-shapes.docx')), { password: 'secret' });
    const path = join(work, 'protected.docx');
    await writeFile(path, encrypted);
    await expectFailure(path, 'office.encrypted');
  });

  it('refuses a plain zip, and a file that is no zip at all, with an Office extension', async () => {
    const zip = new yazl.ZipFile();
    zip.addBuffer(Buffer.from('hello'), 'readme.txt');
    zip.end();
    const plain = join(work, 'plain.docx');
    await writeFile(plain, await collect(zip.outputStream));
    await expectFailure(plain, 'office.not_ooxml');
    const pdf = join(work, 'pdf.pptx');
    await writeFile(pdf, '%PDF-1.7\n%\u00e2\u00e3\n');
    await expectFailure(pdf, 'office.not_ooxml');
  });

  it('rejects path-traversal and absolute entry names', async () => {
    for (const evil of ['../../evil.xml', '/etc/evil.xml']) {
      const path = join(work, 'traversal.docx');
      await writeFile(path, await zipWithEntryNamed(evil));
      await expectFailure(path, 'office.unsafe_entry_name');
    }
  });

  it('reports a truncated package as damaged', async () => {
    const whole = await readFile(join(corpus, 'docx/python-docx-inline-shapes.docx'));
    const path = join(work, 'truncated.docx');
    await writeFile(path, whole.subarray(0, whole.length >> 1));
    await expectFailure(path, 'office.damaged');
  });
});

describe('package names', () => {
  it('resolves relationship targets like a URI reference', () => {
    assert.equal(resolveTarget('word/document.xml', 'media/image1.png'), 'word/media/image1.png');
    assert.equal(resolveTarget('ppt/slides/slide1.xml', '../media/image%201.png'), 'ppt/media/image 1.png');
    assert.equal(resolveTarget('ppt/slides/slide1.xml', '/ppt/media/a.png'), 'ppt/media/a.png');
    assert.equal(resolveTarget('word/document.xml', '../../outside.png'), null);
    assert.equal(resolveTarget('word/document.xml', 'https://example.org/a.png'), null);
  });
});

async function collect(stream: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** A minimal OOXML-looking zip with one more entry named `to` (yazl refuses such names, so it is renamed in both headers). */
async function zipWithEntryNamed(to: string): Promise<Buffer> {
  const placeholder = to.replace(/[./]/g, 'x');
  const zip = new yazl.ZipFile();
  zip.addBuffer(Buffer.from('<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>'), '[Content_Types].xml');
  zip.addBuffer(Buffer.from('<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"/>'), '_rels/.rels');
  zip.addBuffer(Buffer.from('<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"/>'), 'word/document.xml');
  zip.addBuffer(Buffer.from('x'), placeholder);
  zip.end();
  const bytes = await collect(zip.outputStream);
  const raw = Buffer.from(placeholder, 'latin1');
  for (let at = bytes.indexOf(raw); at !== -1; at = bytes.indexOf(raw, at + 1)) bytes.write(to, at, 'latin1');
  return bytes;
}
