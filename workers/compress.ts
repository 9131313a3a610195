import type { MessagePort } from 'node:worker_threads';
import { COMPRESSORS } from '../src/catalog/index.ts';
import { type Compress, type CompressJob, type CompressorFailureCode, type CompressResult, JobError } from './contract.ts';
import type { Comparison, PreviewJob } from './preview.ts';
import { memoryGateFor } from './shared/memory.ts';

/** One task of the pool: which compressor module to run on which files. */
export interface CompressTask {
  worker: string;
  job: CompressJob;
  outDir: string;
  /** Progress goes out as `{ percent, phase }` and memory asks as `{ memory }` (shared/memory.ts); the string `abort` and their answers come in. */
  port: MessagePort;
}

export type CompressOutcome = { ok: true; result: CompressResult } | { ok: false; code: CompressorFailureCode | 'jobs.worker_error'; detail: string };

/** The pool's second task kind: compare previews of a finished job (the string `abort` comes in on `port`). */
export interface PreviewTask {
  preview: PreviewJob;
  port: MessagePort;
}

export type PreviewOutcome = { ok: true; comparison: Comparison } | { ok: false; code: string; detail: string };

const WORKER_MODULES = new Set(COMPRESSORS.map((c) => c.worker));
const loaded = new Map<string, Promise<{ compress: Compress }>>();

/** Compressor modules are named by the catalog and loaded once per worker thread. */
function load(worker: string): Promise<{ compress: Compress }> {
  if (!WORKER_MODULES.has(worker)) throw new JobError('jobs.unknown_compressor', `No compressor module named ${worker}.`);
  let mod = loaded.get(worker);
  if (!mod) {
    // A relative template the bundler can follow: it bundles every module it could name.
    mod = import(`./${worker}.ts`) as Promise<{ compress: Compress }>;
    loaded.set(worker, mod);
  }
  return mod;
}

export default async function run(task: CompressTask | PreviewTask): Promise<CompressOutcome | PreviewOutcome> {
  return 'preview' in task ? preview(task) : compress(task);
}

async function preview(task: PreviewTask): Promise<PreviewOutcome> {
  const controller = new AbortController();
  task.port.on('message', (m) => {
    if (m === 'abort') controller.abort();
  });
  try {
    // Loaded on first use, so compressing threads never load the preview renderers.
    const { makeComparison } = await import('./preview.ts');
    return { ok: true, comparison: await makeComparison(task.preview, controller.signal) };
  } catch (err) {
    if (err instanceof JobError) return { ok: false, code: err.code, detail: err.message };
    const message = err instanceof Error ? err.message : String(err);
    return { ok: false, code: 'compare.unavailable', detail: `The previews could not be made: ${message}` };
  } finally {
    task.port.close();
  }
}

async function compress(task: CompressTask): Promise<CompressOutcome> {
  const controller = new AbortController();
  task.port.on('message', (m) => {
    if (m === 'abort') controller.abort();
  });
  memoryGateFor({ port: task.port, signal: controller.signal });
  try {
    const { compress } = await load(task.worker);
    const result = await compress(task.job, { dir: task.outDir }, {
      signal: controller.signal,
      progress: (percent, phase) => task.port.postMessage({ percent: Math.max(0, Math.min(100, Math.round(percent))), phase }),
    });
    return { ok: true, result };
  } catch (err) {
    if (err instanceof JobError) return { ok: false, code: err.code, detail: err.message };
    const message = err instanceof Error ? err.message : String(err);
    return { ok: false, code: 'jobs.worker_error', detail: `Compression failed: ${message}` };
  } finally {
    memoryGateFor(null);
    task.port.close();
  }
}
