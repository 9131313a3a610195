import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { link, lstat, mkdir, open, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import yazl from 'yazl';
import { fsyncDir } from '../durable/fsync-dir.ts';
import { parseFramed } from '../durable/framing.ts';
import { checkDataFormat, FORMAT_FILE, readDataFormat } from '../durable/data-format.ts';
import { SAFE_ID } from '../jobs/spool.ts';
import type { Job } from '../jobs/types.ts';
import { VERSION } from '../version.ts';
import { JOURNALS, MANIFEST, TOKEN_KEY, type BackupManifest } from './backup-format.ts';

/** How long `backup` looks for an instant between two journal writes before it gives up. */
const CUT_TIMEOUT_MS = 60_000;

/** Length and SHA-256 (hex) of a file's bytes, read as a stream. */
async function describeFile(path: string): Promise<{ bytes: number; sha256: string }> {
  const hash = createHash('sha256');
  let bytes = 0;
  await pipeline(
    createReadStream(path),
    new Transform({
      transform(chunk: Buffer, _enc, done) {
        bytes += chunk.length;
        done(null, chunk);
      },
    }),
    hash,
  );
  return { bytes, sha256: hash.digest('hex') };
}

const describeBuffer = (buf: Buffer) => ({ bytes: buf.length, sha256: createHash('sha256').update(buf).digest('hex') });

type Cut = Map<string, { ino: number; size: number }>;

async function observe(dataDir: string): Promise<Cut> {
  const cut: Cut = new Map();
  for (const name of JOURNALS) {
    const st = await stat(join(dataDir, name)).catch(() => null);
    cut.set(name, { ino: st?.ino ?? -1, size: st?.size ?? 0 });
  }
  return cut;
}

const same = (a: Cut, b: Cut) => [...a].every(([name, x]) => b.get(name)!.ino === x.ino && b.get(name)!.size === x.size);

/**
 * The journals as they stood at one instant, as a crash at that instant would have left them
 * (which every start already recovers from: holds without their job, a finished job whose charge
 * or webhook is not yet written, are completed by `Backend.recover`).
 *
 * The writers (the server, and the CLI for accounts.log) only append to a journal, or replace it
 * whole by a rename when they compact it. So each journal's (inode, length) is the whole of its
 * state, and two successive observations of every journal that agree prove that nothing was
 * written between the end of the first and the start of the second: at any instant in that gap
 * every journal had exactly those bytes. The bytes are then read from descriptors opened on those
 * same inodes: a later append does not change a file's first `size` bytes, and a later compaction
 * renames another file over the name while the descriptor keeps the old one.
 */
async function cutJournals(dataDir: string): Promise<{ at: Date; journals: Map<string, Buffer> }> {
  const deadline = Date.now() + CUT_TIMEOUT_MS;
  let before = await observe(dataDir);
  for (;;) {
    const after = await observe(dataDir);
    const at = new Date();
    if (same(before, after)) {
      const journals = await readCut(dataDir, after);
      if (journals) return { at, journals };
    }
    if (Date.now() > deadline) throw new Error(`the journals of ${dataDir} never stood still between two looks for ${CUT_TIMEOUT_MS / 1000} s`);
    before = after;
  }
}

/** The first `size` bytes of each journal, or null when one was replaced since it was observed. */
async function readCut(dataDir: string, cut: Cut): Promise<Map<string, Buffer> | null> {
  const journals = new Map<string, Buffer>();
  for (const [name, { ino, size }] of cut) {
    if (ino === -1) continue;
    const handle = await open(join(dataDir, name), 'r').catch(() => null);
    if (!handle) return null;
    try {
      if ((await handle.stat()).ino !== ino) return null;
      const buf = Buffer.alloc(size);
      let got = 0;
      while (got < size) {
        const { bytesRead } = await handle.read(buf, got, size - got, got);
        if (bytesRead === 0) return null;
        got += bytesRead;
      }
      journals.set(name, buf);
    } finally {
      await handle.close();
    }
  }
  return journals;
}

/** What backup reads of jobs.log's records (the job store's journal): which jobs exist, in what state. */
type JobRecord = { op: 'put'; job: Job } | { op: 'patch'; id: string; patch: Partial<Job> } | { op: 'handed'; id: string } | { op: 'remove'; id: string };

/** The jobs a cut of jobs.log holds, by id. */
function jobsAt(journal: Buffer | undefined): Map<string, Pick<Job, 'status' | 'expired'>> {
  const jobs = new Map<string, Pick<Job, 'status' | 'expired'>>();
  for (const r of parseFramed<JobRecord>(journal?.toString('utf8') ?? '').records) {
    if (r.op === 'put') jobs.set(r.job.id, { status: r.job.status, expired: r.job.expired ?? false });
    else if (r.op === 'patch') Object.assign(jobs.get(r.id) ?? {}, r.patch);
    else if (r.op === 'remove') jobs.delete(r.id);
  }
  return jobs;
}

/** The spool files each live job at the cut needs: its input, and its output once it succeeded. */
async function blobsOf(dataDir: string, jobs: Map<string, Pick<Job, 'status' | 'expired'>>): Promise<{ wanted: string[]; missing: string[] }> {
  const wanted: string[] = [];
  const missing: string[] = [];
  for (const [id, job] of jobs) {
    if (job.expired || !SAFE_ID.test(id)) continue;
    const names = ['input'];
    if (job.status === 'Succeeded') {
      const legacy = await readdir(join(dataDir, 'spool', id, 'out')).catch(() => []);
      names.push(...(legacy.length === 1 ? [`out/${legacy[0]}`] : ['output']));
    }
    for (const name of names) {
      const path = `spool/${id}/${name}`;
      const found = await lstat(join(dataDir, path)).catch(() => null);
      if (found?.isFile()) wanted.push(path);
      else if (name !== 'input' || job.status === 'Queued' || job.status === 'Running') missing.push(path);
    }
  }
  return { wanted, missing };
}

/**
 * Writes a consistent snapshot of a data dir, running server or not, to `out` (a zip, mode 0600):
 * the journals cut at one instant, the blobs the jobs at that instant own, the download-token key
 * and the FORMAT file. Blobs are hard-linked into a private staging directory inside the data dir
 * right after the cut, so retention deleting one while the archive is written does not lose it.
 */
export async function backup(dataDir: string, out: string): Promise<BackupManifest> {
  checkDataFormat(dataDir);
  const dataFormat = await readDataFormat(dataDir);
  if (!(await stat(join(dataDir, 'accounts.log')).catch(() => null))) throw new Error(`${dataDir} is not a compressd data directory (no accounts.log)`);
  const { at, journals } = await cutJournals(dataDir);
  const jobs = jobsAt(journals.get('jobs.log'));
  const staging = join(dataDir, `.backup-${process.pid}-${randomBytes(4).toString('hex')}`);
  await mkdir(staging, { mode: 0o700 });
  try {
    const { wanted, missing } = await blobsOf(dataDir, jobs);
    const kept: string[] = [];
    for (const path of wanted) {
      await mkdir(join(staging, dirname(path)), { recursive: true, mode: 0o700 });
      try {
        await link(join(dataDir, path), join(staging, path));
        kept.push(path);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
        missing.push(path);
      }
    }
    const small = new Map(journals);
    for (const name of [TOKEN_KEY, FORMAT_FILE]) {
      const buf = await readFile(join(dataDir, name)).catch(() => null);
      if (buf) small.set(name, buf);
    }
    const files: BackupManifest['files'] = {};
    for (const [name, buf] of small) files[name] = describeBuffer(buf);
    // The staged links never change: what is described here is what the archive gets.
    for (const path of kept) files[path] = await describeFile(join(staging, path));
    const manifest: BackupManifest = {
      compressd: VERSION,
      dataFormat,
      at: at.toISOString(),
      journals: Object.fromEntries([...journals].map(([name, buf]) => [name, buf.length])),
      jobs: jobs.size,
      blobs: kept.length,
      missing,
      files,
    };
    const zip = new yazl.ZipFile();
    const file = { mode: 0o100600, mtime: at };
    // First, so that restore knows every entry's length and hash before it writes a byte of one.
    zip.addBuffer(Buffer.from(`${JSON.stringify(manifest, null, 2)}\n`), MANIFEST, file);
    for (const [name, buf] of journals) zip.addBuffer(buf, name, file);
    for (const name of [TOKEN_KEY, FORMAT_FILE]) {
      const buf = small.get(name);
      if (buf) zip.addBuffer(buf, name, { ...file, compress: false });
    }
    // Pictures and documents are compressed already: stored as they are.
    for (const path of kept) zip.addFile(join(staging, path), path, { ...file, compress: false });
    zip.end();
    const tmp = `${out}.${randomBytes(4).toString('hex')}.tmp`;
    await pipeline(zip.outputStream, createWriteStream(tmp, { mode: 0o600, flags: 'wx' }));
    const handle = await open(tmp, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(tmp, out);
    await fsyncDir(dirname(out));
    return manifest;
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

