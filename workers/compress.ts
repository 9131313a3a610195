import type { CompressOutcome, CompressTask, PreviewOutcome, PreviewTask } from '../src/catalog/contract.ts';
import type { CompressorModule } from '../src/catalog/types.ts';
import { type Compress, JobError } from './contract.ts';
import { memoryGateFor } from './shared/memory.ts';
import { forwardProgress } from './shared/progress.ts';

/**
 * Every compressor module the catalog names (its entries' `worker`), one loader each. Loaded on a
 * thread's first job of that kind: a thread that only compresses JPEGs never evaluates the PDF or
 * Office modules (run from source, all six at once cost a thread about 0.6 s and 30 MB more at
 * start than the JPEG module alone).
 */
const COMPRESSOR_MODULES: Record<CompressorModule, () => Promise<{ compress: Compress }>> = {
  jpg: () => import('./jpg.ts'),
  png: () => import('./png.ts'),
  gif: () => import('./gif.ts'),
  universal: () => import('./universal.ts'),
  pdf: () => import('./pdf.ts'),
  office: () => import('./office.ts'),
};
const loaded = new Map<CompressorModule, Promise<{ compress: Compress }>>();

function load(worker: CompressorModule): Promise<{ compress: Compress }> {
  // The name crossed a thread boundary: checked, not trusted to be a key of the table.
  if (!Object.hasOwn(COMPRESSOR_MODULES, worker)) throw new JobError('jobs.unknown_compressor', `No compressor module named ${worker}.`);
  let mod = loaded.get(worker);
  if (!mod) {
    mod = COMPRESSOR_MODULES[worker]();
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
    const result = await compress(task.job, { dir: task.outDir }, { signal: controller.signal, progress: forwardProgress((p) => task.port.postMessage(p)) });
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

