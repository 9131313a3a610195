import { ApiProblem } from './problem.ts';

export { ApiProblem };

export interface JobStatus {
  id: string;
  status: 'Queued' | 'Running' | 'Succeeded' | 'Failed' | 'Canceled';
  format: string;
  /** The compressor the server chose (the catalog's job type). */
  jobType: string;
  progress: { percent: number; phase: string | null };
  metrics: { inputBytes: number; outputBytes: number; creditCost: number; compressionRatio: number; savingsPercent: number; perceivedQuality: number | null };
  error: { code: string; detail: string } | null;
  output: { fileName: string; contentType: string; fileCount: number };
  expiresAt: string | null;
}

export interface Accepted {
  id: string;
  status: string;
  fileName: string;
  format: string;
  jobType: string;
}

export interface CompareResult {
  beforeImage: string;
  afterImage: string;
  originalBytes: number;
  compressedBytes: number;
  beforeMimeType: string;
  afterMimeType: string;
  previewWidth: number;
  previewHeight: number;
  afterPreviewWidth: number;
  afterPreviewHeight: number;
  inputWidth: number;
  inputHeight: number;
  outputWidth: number;
  outputHeight: number;
  wasResized: boolean;
}

/** The spec's compare body, plus what the X-Compare-* headers say was shown. */
export interface CompareView extends CompareResult {
  /** PDF: the page shown and how many the document has. */
  page: { number: number; count: number } | null;
  /** DOCX/PPTX: the part name of the picture shown. */
  picture: string | null;
}

export interface Estimate {
  estimatedCredits: number;
}

export interface Listing {
  compressors: { job: string; inputFormats: string[]; maxFileSizeBytes: number }[];
  /** The format graph: what each compressor makes of a source format (the catalog's output rule). */
  sourceFormatTo: Record<string, { targetFormat: string; job: string }[]>;
  maxFileSizeBytes: number;
  maxBatchFiles: number;
}

/** `/compress/entitlements/me`; only the fields the page shows are relied on, each optional. */
export interface Entitlements {
  account?: string;
  guest?: boolean;
  balance?: number;
  limits?: { maxQueuedJobs?: number };
}

export interface JsonSchema {
  type?: string | string[];
  const?: unknown;
  enum?: unknown[];
  default?: unknown;
  description?: string;
  minimum?: number;
  maximum?: number;
  properties?: Record<string, JsonSchema>;
  allOf?: { if?: JsonSchema; then?: JsonSchema }[];
  required?: string[];
  $comment?: string;
}

export const KEY_HEADER = 'X-Service-Api-Key';

function retryAfterOf(value: string | null): number | null {
  if (!value) return null;
  const n = Number(value);
  return Number.isFinite(n) && n >= 0 ? n : null;
}

async function problemFrom(res: Response): Promise<ApiProblem> {
  let body: Record<string, unknown> = {};
  try {
    body = (await res.json()) as Record<string, unknown>;
  } catch {
    // A non-JSON answer (a proxy page, an empty body) still gets a status-based message.
  }
  const code = typeof body.error === 'string' ? body.error : `http.${res.status}`;
  const detail = typeof body.detail === 'string' ? body.detail : null;
  return new ApiProblem(code, res.status, detail, body, retryAfterOf(res.headers.get('retry-after')));
}

const networkProblem = () => new ApiProblem('network', 0, 'The server could not be reached.');

/** Same-origin calls to the compression API with the key the user gave this page. */
export class Api {
  key = '';

  async request(path: string, init: RequestInit = {}, withKey = true): Promise<Response> {
    const headers = new Headers(init.headers);
    if (withKey) headers.set(KEY_HEADER, this.key);
    let res: Response;
    try {
      res = await fetch(path, { ...init, headers, credentials: 'omit', cache: 'no-store' });
    } catch {
      throw networkProblem();
    }
    if (!res.ok) throw await problemFrom(res);
    return res;
  }

  async json<T>(path: string, init: RequestInit = {}, withKey = true): Promise<T> {
    return (await (await this.request(path, init, withKey)).json()) as T;
  }

  schema(format: string): Promise<JsonSchema> {
    return this.json(`/compress/schema/${encodeURIComponent(format)}`, {}, false);
  }

  listing(): Promise<Listing> {
    return this.json('/compress/compressors');
  }

  entitlements(): Promise<Entitlements> {
    return this.json('/compress/entitlements/me');
  }

  status(id: string): Promise<JobStatus> {
    return this.json(`/compress/job/${encodeURIComponent(id)}`);
  }

  /** `size` full: the previews at the picture's own size, for zooming in; `page`: a PDF's page (1-based). */
  async compare(id: string, size: 'fit' | 'full' = 'fit', page = 1): Promise<CompareView> {
    const res = await this.request(`/compress/job/${encodeURIComponent(id)}/compare?size=${size}&page=${page}`);
    const body = (await res.json()) as CompareResult;
    const number = Number(res.headers.get('x-compare-page'));
    const count = Number(res.headers.get('x-compare-page-count'));
    const picture = res.headers.get('x-compare-picture');
    return { ...body, page: number > 0 && count > 0 ? { number, count } : null, picture: picture ? decodeURI(picture) : null };
  }

  estimate(format: string, fileSizeBytes: number): Promise<Estimate> {
    return this.json(`/compress/estimate/${encodeURIComponent(format)}?fileSizeBytes=${fileSizeBytes}`);
  }

  /** The first `limit` bytes of a job's output (the rest is not fetched). */
  async outputHead(id: string, limit: number): Promise<Uint8Array> {
    const res = await this.request(`/compress/job/${encodeURIComponent(id)}/download`);
    const reader = res.body!.getReader();
    const out = new Uint8Array(limit);
    let filled = 0;
    try {
      while (filled < limit) {
        const { done, value } = await reader.read();
        if (done) break;
        const take = Math.min(value.length, limit - filled);
        out.set(value.subarray(0, take), filled);
        filled += take;
      }
    } finally {
      await reader.cancel().catch(() => undefined);
    }
    return out.subarray(0, filled);
  }

  cancel(id: string): Promise<JobStatus> {
    return this.json(`/compress/job/${encodeURIComponent(id)}/cancel`, { method: 'POST' });
  }

  download(id: string): Promise<Response> {
    return this.request(`/compress/job/${encodeURIComponent(id)}/download`);
  }

  /**
   * `POST /compress` with the file and its options. XMLHttpRequest rather than fetch because
   * only it reports upload progress, which is most of the wait for a large file.
   */
  submit(file: File, options: object, onUpload: (fraction: number) => void, signal: AbortSignal): Promise<Accepted> {
    const form = new FormData();
    form.set('file', file, file.name);
    form.set('options', JSON.stringify(options));
    return new Promise((resolve, reject) => {
      const xhr = new XMLHttpRequest();
      xhr.open('POST', '/compress');
      xhr.setRequestHeader(KEY_HEADER, this.key);
      xhr.responseType = 'text';
      xhr.upload.onprogress = (e) => {
        if (e.lengthComputable && e.total > 0) onUpload(e.loaded / e.total);
      };
      xhr.onerror = () => reject(networkProblem());
      xhr.onabort = () => reject(new ApiProblem('aborted', 0, 'The upload was stopped.'));
      xhr.onload = () => {
        let body: Record<string, unknown> = {};
        try {
          body = JSON.parse(xhr.responseText) as Record<string, unknown>;
        } catch {
          // handled below by the status check
        }
        if (xhr.status === 202 || xhr.status === 200) {
          resolve(body as unknown as Accepted);
          return;
        }
        const code = typeof body.error === 'string' ? body.error : `http.${xhr.status}`;
        const detail = typeof body.detail === 'string' ? body.detail : null;
        reject(new ApiProblem(code, xhr.status, detail, body, retryAfterOf(xhr.getResponseHeader('retry-after'))));
      };
      signal.addEventListener('abort', () => xhr.abort(), { once: true });
      xhr.send(form);
    });
  }
}
