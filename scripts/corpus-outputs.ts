// What every corpus file compresses to with default options, through the offline CLI (the same
// compressors a job runs): each output's SHA-256, or the failure's code. test/corpus-outputs.test.ts
// holds the tree to test/golden/corpus-outputs.tsv, so a change meant to move code (not to change
// a codec) proves its outputs byte-identical. `--write` records the current outputs.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
export const CORPUS = resolve(ROOT, '../shared/corpus');
export const GOLDEN = join(ROOT, 'test/golden/corpus-outputs.tsv');

async function files(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const nested = await Promise.all(entries.map((e) => (e.isDirectory() ? files(join(dir, e.name)) : [join(dir, e.name)])));
  return nested.flat();
}

/** `input<TAB>output<TAB>sha256` per output and `input<TAB>FAIL<TAB>code` per failure, sorted. */
export async function corpusOutputs(): Promise<string> {
  const out = await mkdtemp(join(tmpdir(), 'compressd-corpus-'));
  try {
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', join(ROOT, 'src/main.ts'), 'compress', CORPUS, '--out', out, '--jobs', '2'], {
      cwd: ROOT,
      maxBuffer: 1 << 26,
      env: { ...process.env, COLUMNS: '1000' },
    }).catch((err: { stdout?: string; code?: number }) => {
      // Exit 1: some corpus files are broken on purpose (bad/) and fail.
      if (err.code === 1 && err.stdout) return { stdout: err.stdout };
      throw err;
    });
    const rows: string[] = [];
    for (const m of stdout.matchAll(/^FAIL {2}(\S+): ([a-z_]+\.[a-z_]+):/gm)) rows.push(`${relative(CORPUS, m[1]!)}\tFAIL\t${m[2]}`);
    for (const path of await files(out)) rows.push(`${relative(out, path)}\t-\t${createHash('sha256').update(await readFile(path)).digest('hex')}`);
    return rows.sort().join('\n') + '\n';
  } finally {
    await rm(out, { recursive: true, force: true });
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const table = await corpusOutputs();
  if (process.argv.includes('--write')) await writeFile(GOLDEN, table);
  else process.stdout.write(table);
}
