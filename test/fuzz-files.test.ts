// "No file can stop the service": mutants of real corpus files of every input kind (bit flips,
// truncations, zeroed and repeated ranges) and decompression bombs made on the fly, each
// uploaded as a job. After every case the server answers within 2 s and no answer is a 5xx
// but 503; every job ends Succeeded (with an output that decodes) or Failed with an error
// code within bounded time; no credit stays reserved; the spool holds only live jobs.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join } from 'node:path';
import { after, before, it } from 'node:test';
import * as bombs from './helpers/bombs.ts';
import { fuzzSettings, Invariants, Rng } from './helpers/fuzz.ts';
import { CORPUS, startTestServer, type TestServer } from './helpers/server.ts';

let s: TestServer;
before(async () => {
  // The job timeout is the service's own bound on a job; a bomb must end well before it.
  s = await startTestServer({ workers: '2', rateLimitPerMinute: '0', jobTimeoutSeconds: '90' });
});
after(() => s.stop());

interface FileCase {
  name: string;
  fileName: string;
  data: Buffer;
}

/** The smallest files of each input kind of the corpus (fast jobs, every container). */
function seeds(): { kind: string; files: string[] }[] {
  return readdirSync(CORPUS, { withFileTypes: true })
    .filter((d) => d.isDirectory() && d.name !== 'bad')
    .map((d) => {
      const dir = join(CORPUS, d.name);
      const files = readdirSync(dir)
        .map((f) => join(dir, f))
        .sort((a, b) => statSync(a).size - statSync(b).size);
      return { kind: d.name, files: files.slice(0, 2) };
    });
}

function mutate(r: Rng, data: Buffer, op: number): { how: string; data: Buffer } {
  const out = Buffer.from(data);
  // Half the damage lands in the first 2 KB, where headers, chunk tables and ZIP/PDF structure live.
  const at = (n = out.length) => (r.chance(0.5) ? r.int(Math.min(2048, n)) : r.int(n));
  switch (op % 4) {
    case 0: {
      const flips = 1 + r.int(24);
      for (let i = 0; i < flips; i++) out[at()]! ^= 1 << r.int(8);
      return { how: `${flips} bit flips`, data: out };
    }
    case 1: {
      const cut = Math.max(1, at());
      return { how: `truncated at ${cut}/${out.length}`, data: out.subarray(0, cut) };
    }
    case 2: {
      const from = at();
      const len = 1 + r.int(4096);
      out.fill(0, from, Math.min(out.length, from + len));
      return { how: `zeroed ${len} bytes at ${from}`, data: out };
    }
    default: {
      const from = at();
      const len = 1 + r.int(512);
      const times = 2 + r.int(64);
      const range = out.subarray(from, from + len);
      return { how: `${len} bytes at ${from} repeated ${times}×`, data: Buffer.concat([out.subarray(0, from), ...Array(times).fill(range), out.subarray(from)]) };
    }
  }
}

async function bombCases(): Promise<FileCase[]> {
  const zeros = await bombs.gigabyteOfZeros();
  const pngBomb = bombs.pngInflateBomb(zeros);
  const mediaBomb = async (path: string) => {
    const { data, replaced } = await bombs.replaceInZip(readFileSync(path), (n) => (/\/media\/[^/]+\.(png|jpe?g|gif|emf|tiff?)$/i.test(n) ? pngBomb : undefined));
    if (replaced.length === 0) throw new Error(`${path} has no media to replace`);
    return data;
  };
  return [
    { name: 'PNG inflating to 1 GiB', fileName: 'bomb.png', data: pngBomb },
    { name: 'PNG declaring 100000×100000', fileName: 'declared.png', data: bombs.pngDeclaredBomb() },
    { name: 'GIF declaring 65535×65535', fileName: 'declared.gif', data: bombs.gifDeclaredBomb() },
    { name: 'TIFF strip inflating to 1 GiB', fileName: 'bomb.tiff', data: bombs.tiffInflateBomb(zeros) },
    { name: 'WebP declaring 16384×16384', fileName: 'declared.webp', data: bombs.webpDeclaredBomb() },
    { name: 'PDF content stream inflating to 1 GiB', fileName: 'content-bomb.pdf', data: bombs.pdfContentBomb(zeros) },
    { name: 'PDF image inflating to 1 GiB', fileName: 'image-bomb.pdf', data: bombs.pdfImageBomb(zeros) },
    { name: 'DOCX whose media is a PNG bomb', fileName: 'media-bomb.docx', data: await mediaBomb(join(CORPUS, 'docx/python-docx-inline-shapes.docx')) },
    { name: 'PPTX whose media is a PNG bomb', fileName: 'media-bomb.pptx', data: await mediaBomb(join(CORPUS, 'pptx/python-pptx-shp-picture.pptx')) },
    ...readdirSync(join(CORPUS, 'bad')).map((f) => ({ name: `corpus bad/${f}`, fileName: f, data: readFileSync(join(CORPUS, 'bad', f)) })),
  ];
}

async function submit(inv: Invariants, c: FileCase): Promise<void> {
  const form = new FormData();
  form.set('file', new Blob([c.data]), c.fileName);
  try {
    const res = await s.api('/compress', { method: 'POST', body: form, signal: AbortSignal.timeout(30_000) });
    inv.response(c.name, res.status, Buffer.from(await res.arrayBuffer()), undefined, true, c.data);
  } catch (err) {
    inv.violation(c.name, `upload failed: ${(err as Error).message}`);
  }
  await inv.alive(c.name);
}

it('survives mutated corpus files of every kind and decompression bombs', { timeout: 1_200_000 }, async () => {
  const { seed, cases: perKind } = fuzzSettings('file fuzzer (mutants per input kind)', 4, 'COMPRESSD_FUZZ_FILES');
  const r = new Rng(seed);
  const cases: FileCase[] = [];
  for (const { kind, files } of seeds()) {
    for (let i = 0; i < perKind; i++) {
      const file = files[i % files.length]!;
      const { how, data } = mutate(r, readFileSync(file), i);
      cases.push({ name: `${kind}/${file.split('/').pop()} ${how}`, fileName: `mutant-${i}${extname(file)}`, data });
    }
  }
  cases.push(...(await bombCases()));
  const inv = new Invariants(s);
  const started = Date.now();
  // Batches stay under the per-account queue limit, so every case is a job, not a 429.
  for (let i = 0; i < cases.length; i += 8) {
    for (const c of cases.slice(i, i + 8)) await submit(inv, c);
    await inv.settle(180_000);
    if (inv.violations.length >= 50) break;
  }
  console.log(`file fuzzer: ${cases.length} files in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  inv.report();
});
