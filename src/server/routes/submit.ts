import { randomUUID } from 'node:crypto';
import { extname } from 'node:path';
import { PassThrough } from 'node:stream';
import { Hono, type Context } from 'hono';
import type { Plan } from '../../accounts/plan.ts';
import { acceptedFormats, COMPRESSORS, compressorForFormat, creditsFor, MB, normaliseFormat, type CompressorEntry } from '../../catalog/index.ts';
import { ApiError } from '../../errors.ts';
import type { FetchedInput, FetchToFileOptions } from '../../fetch/fetch-input.ts';
import { validateInputUrl } from '../../fetch/validate-url.ts';
import type { Ledger } from '../../accounts/credits.ts';
import type { BlobStore } from '../../jobs/backend.ts';
import type { JobEngine } from '../../jobs/engine.ts';
import { insufficientCredits } from '../../jobs/lifecycle.ts';
import type { Spool } from '../../jobs/spool.ts';
import { RESERVATION_STEP_BYTES, type DiskGuard, type Reservation } from '../../ops/disk.ts';
import { validateOptions } from '../../options.ts';
import { validateWebhook } from '../../webhooks/validate.ts';
import type { AppEnv } from '../env.ts';
import { Idempotency } from '../idempotency.ts';
import { tooLarge } from '../multipart.ts';

export interface InputFetcher {
  fetchToFile(url: string, opts: FetchToFileOptions): Promise<FetchedInput>;
}

export interface SubmitDeps {
  engine: JobEngine;
  blobs: BlobStore;
  ledger: Pick<Ledger, 'summary'>;
  spool: Spool;
  fetcher: InputFetcher;
  planOf(account: string): Plan;
  disk: Pick<DiskGuard, 'reserve'>;
}

const dotted = (formats: string[]) => formats.map((f) => `.${f}`);

/**
 * An upload whose request declares at most this length goes into the blob store as it arrives
 * (in cluster mode one PutObject from memory, the node's disk untouched); a longer one, or one of
 * unknown length, is spooled first, so that the store gets a file of known length (in cluster mode
 * one PutObject as well, where streaming would take a multipart upload, several times slower).
 */
const STREAMED_UPLOAD_BYTES = 8 * MB;

/** The least a submission can cost before its size is known: its compressor's base cost, on `POST /compress` the catalog's cheapest. */
const minimumCost = (dedicated: CompressorEntry | undefined) => Math.min(...(dedicated ? [dedicated] : COMPRESSORS).map((e) => creditsFor(e.costing, null)));

/**
 * Which compressor takes `format`: on `POST /compress` the catalog's first match; on a
 * dedicated path only that compressor, whose refusal is `compress.<name>.validation.unsupported_format`.
 */
function resolveCompressor(format: string, dedicated: CompressorEntry | undefined): CompressorEntry {
  if (dedicated) {
    if (dedicated.inputFormats.includes(format)) return dedicated;
    const name = dedicated.path.split('/').pop();
    throw new ApiError(`compress.${name}.validation.unsupported_format`, 400, `The ${dedicated.jobType} compressor does not accept "${format}" files.`, {
      format,
      supportedFormats: dotted(dedicated.inputFormats),
    });
  }
  const entry = compressorForFormat(format);
  if (!entry) {
    throw new ApiError('compress.unsupported_format', 400, `The format "${format}" is not supported.`, {
      format,
      supportedFormats: dotted(acceptedFormats()),
    });
  }
  return entry;
}

function formatOfFileName(name: string): string {
  const ext = extname(name);
  if (!ext || ext === '.') throw new ApiError('request.invalid_extension', 400, `The file name "${name}" has no extension; the format is read from it.`);
  return normaliseFormat(ext);
}

function baseName(name: string): string {
  const base = name.split(/[\\/]/).pop() ?? '';
  const ext = extname(base);
  return (ext ? base.slice(0, -ext.length) : base) || 'file';
}

const text = (v: unknown) => (typeof v === 'string' ? v : undefined);

/** An upload's place among its account's submissions in flight and its hold on free disk space. */
interface Place {
  disk: Reservation;
  /** Gives back both (safe to call twice). */
  release(): void;
}

export function submitRoutes(deps: SubmitDeps) {
  const app = new Hono<AppEnv>();
  const idempotency = new Idempotency({
    rememberedKey: (account, key, at) => deps.engine.rememberedKey(account, key, at),
    maxFileSizeBytes: (account) => deps.planOf(account).maxFileSizeBytes,
  });

  async function submitUrl(c: Context<AppEnv>, id: string, body: Record<string, unknown>, dedicated: CompressorEntry | undefined, place: Place) {
    const principal = c.get('principal');
    if (body.outputUrl !== undefined) throw new ApiError('url_fetch.output_url_reserved', 400, 'outputUrl is reserved and must not be sent.', { isRetryable: false });
    if (principal.guest) throw new ApiError('url_fetch.guest_not_allowed', 403, 'URL input needs a signed-in account; upload the file instead.', { isRetryable: false });
    const rawFormat = text(body.sourceFormat);
    if (rawFormat === undefined || rawFormat.trim() === '') {
      throw new ApiError('url_fetch.missing_source_format', 400, 'sourceFormat is required with inputUrl.', { isRetryable: false });
    }
    const format = normaliseFormat(rawFormat);
    const entry = resolveCompressor(format, dedicated);
    validateInputUrl(body.inputUrl);
    const options = validateOptions(entry, body.options);
    const webhook = validateWebhook(body);
    const plan = deps.planOf(principal.account);
    const destPath = await deps.spool.prepare(id);
    let available = 0;
    /** 402 as soon as the remote length (declared, or counted so far) costs more than the account has. */
    const payable = (bytes: number) => {
      const required = creditsFor(entry.costing, bytes);
      if (required > available) throw insufficientCredits(required, available);
    };
    /** The download's own hold on free disk space, beside the request body's. */
    let download: Reservation | undefined;
    try {
      const fetched = await deps.fetcher.fetchToFile(String(body.inputUrl), {
        destPath,
        maxBytes: plan.maxFileSizeBytes,
        accountId: principal.account,
        sourceFormat: format,
        beforeBody: async (length) => {
          ({ available } = await deps.ledger.summary(principal.account));
          if (length !== null) payable(length);
          // A declared length is held whole before a byte is written; a body of unknown length is held
          // in steps as it arrives, as a chunked upload is (holding the size limit would refuse it on
          // every volume with less than twice that free).
          download = await deps.disk.reserve(principal.account, {
            first: length ?? Math.min(RESERVATION_STEP_BYTES, plan.maxFileSizeBytes),
            expected: length ?? 0,
            limit: length ?? plan.maxFileSizeBytes,
          });
        },
        received: (bytes) => {
          payable(bytes);
          return download?.advance(bytes);
        },
      });
      const bytes = await deps.blobs.putFile(id, 'input', destPath);
      const leave = () => {
        download?.release();
        place.release();
      };
      return await admit(c, { id, entry, format, fileName: baseName(fetched.fileName), bytes, options, webhook }, leave);
    } finally {
      download?.release();
    }
  }

  async function admit(
    c: Context<AppEnv>,
    a: { id: string; entry: CompressorEntry; format: string; fileName: string; bytes: number; options: ReturnType<typeof validateOptions>; webhook: ReturnType<typeof validateWebhook> },
    leaveQueue: () => void,
  ) {
    const { bytes } = a;
    // The body is stored, so the upload's place goes now: the admission counts it as a job from the
    // moment it is indexed (files mode: before its records are durable), and a place still held then
    // would count it twice and turn away a racing upload that has room.
    leaveQueue();
    const admitted = await deps.engine.submit({
      id: a.id,
      account: c.get('principal').account,
      jobType: a.entry.jobType,
      format: a.format,
      fileName: a.fileName,
      options: a.options,
      inputBytes: bytes,
      creditCost: creditsFor(a.entry.costing, bytes),
      webhook: a.webhook,
    }, idempotency.claim(c));
    return idempotency.accepted(c, admitted);
  }

  /** Tickets of each account's submissions whose body is still arriving: open jobs until admitted or abandoned. */
  const inFlight = new Map<string, Set<number>>();
  let tickets = 0;

  /**
   * What is checked before a byte of the body is read, so that the body of an account that cannot
   * pay, has no room in its queue, or would not fit on the volume never reaches the disk: 413 for
   * a declared length far over the limit, 402 when the account cannot pay the minimum cost, 429
   * when its open jobs and uploads in progress fill its queue, 503 when the declared length does
   * not fit in the free space that writes in progress leave, or the first step of the body does
   * not fit in the account's share of it. Admission checks credits and the queue again and
   * decides; these only stop the bytes early. Returns the upload's place, with its disk
   * reservation (grown as bytes arrive) and the release of both (safe to call twice).
   */
  async function checkBeforeBody(c: Context<AppEnv>, dedicated: CompressorEntry | undefined): Promise<Place> {
    const { account } = c.get('principal');
    const plan = deps.planOf(account);
    const header = c.req.header('content-length');
    const declared = header === undefined ? null : Number(header);
    // Multipart overhead is small: a body far beyond the limit is refused without reading it.
    if (declared !== null && declared > plan.maxFileSizeBytes + MB) throw tooLarge(plan.maxFileSizeBytes);
    const required = minimumCost(dedicated);
    const { available } = await deps.ledger.summary(account);
    if (available < required) throw insufficientCredits(required, available);
    // The place is taken before any await, so of uploads racing in each counts those before it
    // still uploading once the counts are in (one admitted meanwhile is counted as a job).
    const ticket = ++tickets;
    const places = inFlight.get(account) ?? new Set<number>();
    places.add(ticket);
    inFlight.set(account, places);
    let held = true;
    let disk: Reservation | undefined;
    const release = () => {
      if (!held) return;
      held = false;
      places.delete(ticket);
      if (places.size === 0 && inFlight.get(account) === places) inFlight.delete(account);
      disk?.release();
    };
    try {
      await deps.engine.assertQueueRoom(account, () => [...places].filter((t) => t < ticket).length);
      const known = declared !== null && Number.isFinite(declared);
      const limit = known ? declared : plan.maxFileSizeBytes + MB;
      disk = await deps.disk.reserve(account, { first: Math.min(limit, RESERVATION_STEP_BYTES), expected: known ? declared : 0, limit });
    } catch (err) {
      release();
      throw err;
    }
    return { disk, release };
  }

  async function submit(c: Context<AppEnv>, dedicated?: CompressorEntry) {
    const replayed = await idempotency.begin(c, dedicated?.path ?? '/compress');
    if (replayed) return replayed;
    const contentType = (c.req.header('content-type') ?? '').toLowerCase();
    const id = randomUUID();
    const isJson = contentType.startsWith('application/json');
    if (!isJson && !contentType.startsWith('multipart/form-data')) {
      throw new ApiError('request.invalid_content_type', 400, 'Send multipart/form-data (file upload) or application/json (URL input).');
    }
    const place = await checkBeforeBody(c, dedicated);
    const declared = Number(c.req.header('content-length') ?? Infinity);
    const streamed = declared <= STREAMED_UPLOAD_BYTES;
    /** A streamed upload's way into the blob store, once its file part begins. */
    let storing: Promise<number> | undefined;
    try {
      if (isJson) return await submitUrl(c, id, await idempotency.receiveJson(c), dedicated, place);
      const plan = deps.planOf(c.get('principal').account);
      let entry: CompressorEntry | undefined;
      let format = '';
      let storeFailure: unknown;
      const upload = await idempotency
        .receiveMultipart(c, {
          maxBytes: plan.maxFileSizeBytes,
          received: (bytes) => place.disk.advance(bytes),
          accept: (name) => {
            format = formatOfFileName(name);
            entry = resolveCompressor(format, dedicated);
          },
          destination: async () => {
            if (!streamed) return deps.spool.prepare(id);
            const body = new PassThrough();
            storing = deps.blobs.put(id, 'input', body);
            storing.catch((err) => {
              if (body.destroyed) return;
              storeFailure = err;
              body.destroy(err);
            });
            return body;
          },
        })
        // The store's own failure (storage unreachable) is not the client's; a full disk is already told as such.
        .catch((err) => {
          throw storeFailure === undefined || (storeFailure as NodeJS.ErrnoException).code === 'ENOSPC' ? err : storeFailure;
        });
      const { fields, file } = upload;
      if (file && fields.inputUrl !== undefined) throw new ApiError('url_fetch.mutually_exclusive', 400, 'Send either file or inputUrl, not both.', { isRetryable: false });
      if (!file) {
        if (fields.inputUrl !== undefined) return await submitUrl(c, id, fields, dedicated, place);
        throw new ApiError('request.no_files', 400, 'No file was attached (form field "file").');
      }
      if (file.bytes === 0) throw new ApiError('request.empty_file', 400, 'The file is empty.');
      const options = validateOptions(entry!, fields.options);
      const webhook = validateWebhook(fields);
      // Admitted only once the input is durable in the blob store.
      const bytes = streamed ? await storing! : await deps.blobs.putFile(id, 'input', file.path);
      return await admit(c, { id, entry: entry!, format, fileName: baseName(file.name), bytes, options, webhook }, place.release);
    } catch (err) {
      // An upload still on its way must land (or fail) before its blob is deleted, or it would outlive the delete.
      await storing?.catch(() => {});
      await Promise.all([deps.spool.discard(id), deps.blobs.delete(id)]);
      throw err;
    } finally {
      place.release();
    }
  }

  app.post('/compress', (c) => submit(c));
  for (const entry of COMPRESSORS) app.post(entry.path, (c) => submit(c, entry));
  return app;
}
