import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { compressCommand } from '../src/cli/compress.ts';

const CORPUS = fileURLToPath(new URL('../../shared/corpus/', import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'compressd-cli-'));
after(() => rmSync(work, { recursive: true, force: true }));

class Capture extends Writable {
  text = '';
  constructor(readonly isTTY = false, readonly columns = 100) {
    super();
  }
  override _write(chunk: Buffer, _enc: string, done: () => void): void {
    this.text += chunk.toString();
    done();
  }
}

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

async function cli(args: string[], cwd: string, tty = false, columns = 100): Promise<Result> {
  const stdout = new Capture(false, columns);
  const stderr = new Capture(tty);
  const code = await compressCommand(args.includes('--jobs') ? args : [...args, '--jobs', '2'], { stdout, stderr, cwd });
  return { code, stdout: stdout.text, stderr: stderr.text };
}

/** A fresh directory holding corpus files under the given relative names. */
function fixture(files: Record<string, string>): string {
  const dir = mkdtempSync(join(work, 'case-'));
  for (const [name, source] of Object.entries(files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true });
    copyFileSync(join(CORPUS, source), join(dir, name));
  }
  return dir;
}

const snapshot = (dir: string, names: string[]) => Object.fromEntries(names.map((n) => [n, readFileSync(join(dir, n)).toString('base64')]));

describe('compressd compress', () => {
  test('a directory keeps its layout under --out; one line per file, a skipped one with its reason, a total; inputs untouched', async () => {
    // A camera JPEG (a CMYK one already below the perceived target comes back as it is).
    const dir = fixture({ 'photos/a.jpg': 'jpg/jpeg420exif.jpg', 'photos/art/b.png': 'png/density_plot.png', 'photos/notes.txt': 'MANIFEST.tsv' });
    const before = snapshot(dir, ['photos/a.jpg', 'photos/art/b.png']);
    const r = await cli(['photos', '--out', 'small'], dir);
    assert.equal(r.code, 0, r.stdout);
    assert.deepEqual(snapshot(dir, ['photos/a.jpg', 'photos/art/b.png']), before);
    for (const [input, output] of [['photos/a.jpg', 'small/a.jpg'], ['photos/art/b.png', 'small/art/b.png']]) {
      assert.ok(readFileSync(join(dir, output)).length < readFileSync(join(dir, input)).length, output);
    }
    assert.ok(!existsSync(join(dir, 'small/notes.txt')), 'a directory walk keeps supported formats only');
    assert.match(r.stdout, /^ok {4}photos\/a\.jpg +\d[\d.]* KiB → +\d[\d.]* KiB +\d[\d.]*%$/m);
    assert.match(r.stdout, /^skip {2}photos\/notes\.txt: no compressor takes \.txt files$/m);
    assert.match(r.stdout, /^total 2 compressed, 0 failed, 1 skipped; .* \(saved [\d.]+%\); outputs in small$/m);
    for (const name of ['a.jpg', 'b.png', 'notes.txt']) assert.equal(r.stdout.split('\n').filter((l) => l.includes(name)).length, 1, `${name} is reported once`);
    assert.deepEqual(readdirSync(join(dir, 'small')).filter((n) => n.startsWith('.')), [], 'no work directory left behind');
  });

  test('the default output directory is ./compressed; an input is never overwritten without --in-place', async () => {
    const dir = fixture({ 'a.png': 'png/density_plot.png', 'b.gif': 'gif/file-type-fixture.gif' });
    const before = snapshot(dir, ['a.png', 'b.gif']);
    const r = await cli(['a.png', 'b.gif', '--out', '.'], dir);
    assert.equal(r.code, 1);
    assert.match(r.stdout, /^FAIL {2}a\.png: cli\.would_overwrite: a\.png is an input; use --in-place/m);
    assert.deepEqual(snapshot(dir, ['a.png', 'b.gif']), before);
    const ok = await cli(['*.png'], dir);
    assert.equal(ok.code, 0, ok.stdout);
    assert.ok(existsSync(join(dir, 'compressed/a.png')), 'a quoted glob expands');
    assert.ok(!existsSync(join(dir, 'compressed/b.gif')));
  });

  test('--in-place replaces a same-format input and writes a new format beside its kept input', async () => {
    const dir = fixture({ 'a.png': 'png/density_plot.png', 'logo.webp': 'webp/derived-exifr-logo-lossless-alpha.webp' });
    const original = readFileSync(join(dir, 'a.png'));
    const webp = readFileSync(join(dir, 'logo.webp'));
    const r = await cli(['a.png', 'logo.webp', '--in-place'], dir);
    assert.equal(r.code, 0, r.stdout);
    assert.ok(readFileSync(join(dir, 'a.png')).length < original.length);
    assert.equal((await sharp(join(dir, 'logo.png')).metadata()).format, 'png');
    assert.ok(readFileSync(join(dir, 'logo.webp')).equals(webp));
    assert.deepEqual(readdirSync(dir).sort(), ['a.png', 'logo.png', 'logo.webp']);
    assert.equal((await cli(['--in-place', '--out', 'x', 'a.png'], dir)).code, 2);
  });

  test('failures are reported per file and make the exit status 1; the other files still compress', async () => {
    const dir = fixture({ 'good.gif': 'gif/file-type-fixture.gif', 'empty.jpg': 'bad/empty.jpg', 'pdf-in-disguise.jpg': 'bad/actually-pdf.jpg', 'notes.txt': 'MANIFEST.tsv' });
    const r = await cli(['good.gif', 'empty.jpg', 'pdf-in-disguise.jpg', 'notes.txt', 'missing.png'], dir);
    assert.equal(r.code, 1);
    assert.match(r.stdout, /^ok {4}good\.gif /m);
    assert.match(r.stdout, /^FAIL {2}empty\.jpg: /m);
    assert.match(r.stdout, /^FAIL {2}pdf-in-disguise\.jpg: /m);
    assert.match(r.stdout, /^FAIL {2}notes\.txt: compress\.unsupported_format: /m);
    assert.match(r.stdout, /^FAIL {2}missing\.png: cli\.no_input: /m);
    assert.match(r.stdout, /^total 1 compressed, 4 failed, 0 skipped; /m);
  });

  test('--options: validated against the catalog, applied to the compressors that have them', async () => {
    const dir = fixture({ 'a.jpg': 'jpg/baiona_cmyk.jpg', 'b.png': 'png/density_plot.png' });
    const bad = await cli(['a.jpg', '--options', '{"resize":{"preset":"8k"}}'], dir);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--options\.resize\.preset must be equal to one of the allowed values/);
    assert.equal((await cli(['a.jpg', '--options', '{"qualty":80}'], dir)).code, 2);
    assert.equal((await cli(['a.jpg', '--options', 'not json'], dir)).code, 2);
    const options = JSON.stringify({ resize: { enabled: true, mode: 'pixels', preset: 'custom', value: 300 }, compression: { mode: 'lossless' } });
    const r = await cli(['a.jpg', 'b.png', '--options', options], dir);
    assert.equal(r.code, 0, r.stdout);
    const meta = await sharp(join(dir, 'compressed/a.jpg')).metadata();
    assert.equal(Math.max(meta.width!, meta.height!), 300);
  });

  test('a resize value without its mode is refused as the API refuses it, and a resize that changes nothing is warned about', async () => {
    const dir = fixture({ 'a.jpg': 'jpg/baiona_cmyk.jpg' });
    const noMode = await cli(['a.jpg', '--options', '{"resize":{"enabled":true,"value":800}}'], dir);
    assert.equal(noMode.code, 2);
    assert.match(noMode.stderr, /^compressd compress: --options\.resize must have required property 'mode'$/m);
    assert.ok(!existsSync(join(dir, 'compressed')), 'nothing was compressed');
    for (const [options, warning] of [
      ['{"resize":{"mode":"pixels","value":100}}', /^compressd compress: warning: --options\.resize has no effect without "enabled": true$/m],
      ['{"resize":{"enabled":true,"mode":"pixels"}}', /^compressd compress: warning: --options\.resize has no effect: give a "preset" \(4k, 2k, 1080p, 720p\), or a "mode" and a "value"$/m],
      ['{"resize":{"enabled":true,"preset":"720p","mode":"pixels","value":100}}', /^compressd compress: warning: --options\.resize\.value is ignored: the preset 720p sets the size$/m],
    ] as const) {
      const r = await cli(['a.jpg', '--options', options, '--out', 'warned'], dir);
      assert.equal(r.code, 0, r.stdout);
      assert.match(r.stderr, warning, options);
    }
    const quiet = await cli(['a.jpg', '--options', '{"resize":{"enabled":true,"mode":"pixels","value":100}}', '--out', 'quiet'], dir);
    assert.equal(quiet.code, 0);
    assert.equal(quiet.stderr, '');
  });

  test('a file with no extension: skipped in a directory and failed when named, saying how to name it', async () => {
    const dir = fixture({ 'photos/a.jpg': 'jpg/baiona_cmyk.jpg', 'photos/IMG_0001': 'jpg/baiona_cmyk.jpg' });
    const reason = "no extension, so its format is unknown; rename it with its format's extension (.jpg, .png, .pdf, …)";
    const walked = await cli(['photos'], dir, false, 200);
    assert.equal(walked.code, 0, walked.stdout);
    assert.ok(walked.stdout.includes(`skip  photos/IMG_0001: ${reason}\n`), walked.stdout);
    const named = await cli(['photos/IMG_0001'], dir, false, 200);
    assert.equal(named.code, 1);
    assert.ok(named.stdout.includes(`FAIL  photos/IMG_0001: compress.unsupported_format: ${reason}\n`), named.stdout);
  });

  test('on a terminal: a live bar per running file, erased as files finish', async () => {
    const dir = fixture({ 'a.jpg': 'jpg/baiona_cmyk.jpg', 'b.png': 'png/density_plot.png' });
    const r = await cli(['a.jpg', 'b.png'], dir, true);
    assert.equal(r.code, 0);
    assert.match(r.stderr, /a\.jpg +\[[█░]{20}\] +\d+% \w+/);
    assert.match(r.stderr, /\x1b\[\d+F\x1b\[J/);
    assert.match(r.stdout, /^ok {4}a\.jpg/m);
  });

  test('lines fit the terminal (80 columns by default, or stdout\'s columns): long names are cut in the middle, reasons wrap between words', async () => {
    const deep = 'a folder with a rather long name/and another one inside it, also long';
    const dir = fixture({ [`${deep}/the photograph of the harbour at dusk.jpg`]: 'jpg/baiona_cmyk.jpg', [`${deep}/an empty file that fails.jpg`]: 'bad/empty.jpg', [`${deep}/README of the folder.md`]: 'MANIFEST.tsv' });
    for (const columns of [80, 50]) {
      const r = await cli([deep.split('/')[0]!, '--out', `out-${columns}`], dir, false, columns);
      assert.equal(r.code, 1);
      const lines = r.stdout.trimEnd().split('\n');
      for (const line of lines) assert.ok([...line].length < columns, `${[...line].length} columns at ${columns}: ${line}`);
      assert.match(r.stdout, columns === 80 ? /^ok {4}a folder.*….*harbour at dusk\.jpg +\d/m : /^ok {4}a .*….*\.jpg +\d/m, 'the name keeps its start and its end');
      // An entry is its first line and the indented lines under it, read back as one line.
      const entry = (status: string) => {
        const from = lines.findIndex((l) => l.startsWith(status));
        const rest = lines.slice(from + 1);
        const end = rest.findIndex((l) => !l.startsWith(' '));
        return [lines[from], ...rest.slice(0, end < 0 ? rest.length : end)].map((l) => l?.trim()).join(' ');
      };
      assert.match(entry('skip'), /^skip .*….*\.md: no compressor takes \.md files$/);
      assert.match(entry('FAIL'), /^FAIL .*….*fails\.jpg: image\.empty: The file is empty\.$/, 'the reason, unwrapped, reads whole');
    }
  });

  test('usage errors exit 2', async () => {
    const dir = fixture({});
    writeFileSync(join(dir, 'x.jpg'), '');
    assert.equal((await cli([], dir)).code, 2);
    assert.equal((await cli(['x.jpg', '--jobs', '0'], dir)).code, 2);
    assert.equal((await cli(['x.jpg', '--bogus'], dir)).code, 2);
  });
});
