import { pipeline, Readable } from 'node:stream';
import { constants, createBrotliCompress, createGzip } from 'node:zlib';
import type { MiddlewareHandler } from 'hono';
import type { AppEnv } from '../env.ts';

export type ContentCoding = 'br' | 'gzip';

/** Below this a compressed body saves less than its headers and the client's work cost. */
export const MIN_COMPRESSED_BYTES = 1024;

/** JSON (also `application/schema+json`) and text: the answers that shrink. Outputs are never among them. */
const COMPRESSIBLE = /^\s*(?:application\/(?:[\w.-]+\+)?json|text\/[\w.+-]+)\s*(?:;|$)/i;

/** The client's preferred coding among ours (q-values, `*`); on a tie brotli, which is smaller. */
export function negotiateEncoding(acceptEncoding: string | undefined): ContentCoding | null {
  if (!acceptEncoding) return null;
  const weights = new Map<string, number>();
  for (const part of acceptEncoding.split(',')) {
    const [name = '', ...params] = part.split(';');
    const coding = name.trim().toLowerCase();
    if (!coding) continue;
    const q = params.map((p) => /^\s*q\s*=\s*([0-9.]+)\s*$/i.exec(p)?.[1]).find((v) => v !== undefined);
    const weight = q === undefined ? 1 : Number(q);
    if (!Number.isNaN(weight)) weights.set(coding, weight);
  }
  let best: ContentCoding | null = null;
  let bestWeight = 0;
  for (const coding of ['br', 'gzip'] as const) {
    const weight = weights.get(coding) ?? weights.get('*') ?? 0;
    if (weight > bestWeight) [best, bestWeight] = [coding, weight];
  }
  return best;
}

export function varyOnEncoding(headers: Headers): void {
  const vary = headers.get('vary');
  if (!vary) headers.set('vary', 'Accept-Encoding');
  else if (vary.trim() !== '*' && !/(?:^|,)\s*accept-encoding\s*(?:,|$)/i.test(vary)) headers.set('vary', `${vary}, Accept-Encoding`);
}

/** Answers are made per request, so brotli runs at a middle quality: close to its best size at gzip's speed. */
const encoder = (coding: ContentCoding) =>
  coding === 'br' ? createBrotliCompress({ params: { [constants.BROTLI_PARAM_QUALITY]: 5 } }) : createGzip();

/** The bytes already read, then the rest of the body, as one stream that cancels the body when dropped. */
async function* replay(head: Uint8Array[], reader: ReadableStreamDefaultReader<Uint8Array>): AsyncGenerator<Uint8Array> {
  try {
    yield* head;
    for (let r = await reader.read(); !r.done; r = await reader.read()) yield r.value;
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

/**
 * Compresses JSON and text answers of at least `MIN_COMPRESSED_BYTES` with the coding the client
 * accepts, streaming. Every answer of such a type says `Vary: Accept-Encoding`, as its size, and
 * so its coding, may differ next time. Answers that carry their own coding (the page's files,
 * compressed once) or forbid transformation (downloads) pass untouched.
 */
export const compression: MiddlewareHandler<AppEnv> = async (c, next) => {
  await next();
  const res = c.res;
  if (res.headers.has('content-encoding') || !COMPRESSIBLE.test(res.headers.get('content-type') ?? '')) return;
  if (/(?:^|,)\s*no-transform\s*(?:,|$)/i.test(res.headers.get('cache-control') ?? '')) return;
  varyOnEncoding(res.headers);
  const coding = negotiateEncoding(c.req.header('accept-encoding'));
  const declared = res.headers.get('content-length');
  // Reading `body` turns the adapter's in-memory answer into a stream: only when it may be compressed.
  if (!coding || (declared !== null && Number(declared) < MIN_COMPRESSED_BYTES) || !res.body) return;

  const reader = res.body.getReader();
  const head: Uint8Array[] = [];
  let bytes = 0;
  let done = false;
  while (!done && bytes < MIN_COMPRESSED_BYTES) {
    const r = await reader.read();
    if (r.done) done = true;
    else {
      head.push(r.value);
      bytes += r.value.byteLength;
    }
  }
  if (done && bytes < MIN_COMPRESSED_BYTES) {
    c.res = new Response(Buffer.concat(head), res);
    return;
  }
  const headers = new Headers(res.headers);
  headers.delete('content-length');
  headers.set('content-encoding', coding);
  if (c.req.method === 'HEAD') {
    await reader.cancel();
    c.res = new Response(null, { status: res.status, headers });
    return;
  }
  // pipeline, not pipe: a client gone mid-answer destroys the encoder and cancels the body.
  const encoded = pipeline(Readable.from(replay(head, reader), { objectMode: false }), encoder(coding), () => undefined);
  c.res = new Response(Readable.toWeb(encoded) as ReadableStream, { status: res.status, headers });
};
