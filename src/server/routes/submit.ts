import { randomUUID } from 'node:crypto';
import { extname } from 'node:path';
import { Hono, type Context, type MiddlewareHandler } from 'hono';
import { every } from 'hono/combine';
import type { Plan } from '../../accounts/plan.ts';
import { acceptedFormats, COMPRESSORS, compressorForFormat, creditsFor, normaliseFormat, type CompressorEntry } from '../../catalog/index.ts';
import type { Clock } from '../../clock.ts';
import { ApiError } from '../../errors.ts';
import type { FetchedInput, FetchToFileOptions } from '../../fetch/fetch-input.ts';
import { validateInputUrl } from '../../fetch/validate-url.ts';
import type { Ledger } from '../../accounts/credits.ts';
import type { BlobStore } from '../../jobs/backend.ts';
import type { JobEngine } from '../../jobs/engine.ts';
import { insufficientCredits } from '../../jobs/lifecycle.ts';
import type { Spool } from '../../jobs/spool.ts';
import { RESERVATION_STEP_BYTES, type DiskGuard, type Reservation } from '../../ops/disk.ts';
import { assertOptionsObject, validateOptions } from '../../options.ts';
import { validateWebhook } from '../../webhooks/validate.ts';
import type { AppEnv } from '../env.ts';
import { Idempotency } from '../idempotency.ts';
import { uploadGate } from '../middleware/upload-gate.ts';
import { UploadDestination } from '../upload-destination.ts';
import { UploadSlots } from '../upload-slots.ts';

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
  /** What an idempotency key's 24 hours are measured by. */
  clock: Clock;
}

const dotted = (formats: string[]) => formats.map((f) => `.${f}`);

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


/** What the engine admits: the stored input and what was validated of the request. */
interface Admission {
  id: string;
  entry: CompressorEntry;
  format: string;
  fileName: string;
  bytes: number;
  options: ReturnType<typeof validateOptions>;
  webhook: ReturnType<typeof validateWebhook>;
}

/**
 * The body of a submission past its gate: the file received into the blob store, or the URL's
 * content fetched into it, then the job admitted. On failure whatever of the input was kept goes.
 */
/** The submission's text fields (spec, "Submit a job"), which may also come as file parts. */
const FORM_TEXT_FIELDS: ReadonlySet<string> = new Set(['inputUrl', 'sourceFormat', 'options', 'webhookUrl', 'webhookSecret', 'webhookEvents']);

class Submissions {
  constructor(
    private readonly deps: SubmitDeps,
    private readonly idempotency: Idempotency,
  ) {}

  async submit(c: Context<AppEnv>, dedicated: CompressorEntry | undefined): Promise<Response> {
    const id = randomUUID();
    const destination = new UploadDestination(this.deps, id, c.req.header('content-length'));
    try {
      if ((c.req.header('content-type') ?? '').toLowerCase().startsWith('application/json')) {
        const body = await this.idempotency.receiveJson(c);
        assertOptionsObject(body.options);
        return await this.submitUrl(c, { id, body, dedicated });
      }
      return await this.submitFile(c, { id, dedicated, destination });
    } catch (err) {
      await destination.discard();
      throw err;
    }
  }

  private async submitFile(c: Context<AppEnv>, r: { id: string; dedicated: CompressorEntry | undefined; destination: UploadDestination }): Promise<Response> {
    const place = c.get('upload');
    const plan = this.deps.planOf(c.get('principal').account);
    let entry: CompressorEntry | undefined;
    let format = '';
    const { fields, file } = await this.idempotency
      .receiveMultipart(c, {
        maxBytes: plan.maxFileSizeBytes,
        received: (bytes) => place.disk.advance(bytes),
        textFields: FORM_TEXT_FIELDS,
        accept: (name) => {
          format = formatOfFileName(name);
          entry = resolveCompressor(format, r.dedicated);
        },
        destination: () => r.destination.open(),
      })
      .catch((err) => {
        throw r.destination.blame(err);
      });
    if (file && fields.inputUrl !== undefined) throw new ApiError('url_fetch.mutually_exclusive', 400, 'Send either file or inputUrl, not both.', { isRetryable: false });
    if (!file) {
      if (fields.inputUrl !== undefined) return await this.submitUrl(c, { id: r.id, body: fields, dedicated: r.dedicated });
      throw new ApiError('request.no_files', 400, 'No file was attached (form field "file").');
    }
    if (file.bytes === 0) throw new ApiError('request.empty_file', 400, 'The file is empty.');
    const options = validateOptions(entry!, fields.options);
    const webhook = validateWebhook(fields);
    // Admitted only once the input is durable in the blob store.
    const bytes = await r.destination.stored(file.path);
    return await this.admit(c, { id: r.id, entry: entry!, format, fileName: baseName(file.name), bytes, options, webhook }, place.release);
  }

  private async submitUrl(c: Context<AppEnv>, r: { id: string; body: Record<string, unknown>; dedicated: CompressorEntry | undefined }): Promise<Response> {
    const { id, body } = r;
    const principal = c.get('principal');
    if (body.outputUrl !== undefined) throw new ApiError('url_fetch.output_url_reserved', 400, 'outputUrl is reserved and must not be sent.', { isRetryable: false });
    if (principal.guest) throw new ApiError('url_fetch.guest_not_allowed', 403, 'URL input needs a signed-in account; upload the file instead.', { isRetryable: false });
    const rawFormat = text(body.sourceFormat);
    if (rawFormat === undefined || rawFormat.trim() === '') {
      throw new ApiError('url_fetch.missing_source_format', 400, 'sourceFormat is required with inputUrl.', { isRetryable: false });
    }
    const format = normaliseFormat(rawFormat);
    const entry = resolveCompressor(format, r.dedicated);
    validateInputUrl(body.inputUrl);
    const options = validateOptions(entry, body.options);
    const webhook = validateWebhook(body);
    const plan = this.deps.planOf(principal.account);
    const destPath = await this.deps.spool.prepare(id);
    let available = 0;
    /** 402 as soon as the remote length (declared, or counted so far) costs more than the account has. */
    const payable = (bytes: number) => {
      const required = creditsFor(entry.costing, bytes);
      if (required > available) throw insufficientCredits(required, available);
    };
    /** The download's own hold on free disk space, beside the request body's. */
    let download: Reservation | undefined;
    try {
      const fetched = await this.deps.fetcher.fetchToFile(String(body.inputUrl), {
        destPath,
        maxBytes: plan.maxFileSizeBytes,
        accountId: principal.account,
        sourceFormat: format,
        beforeBody: async (length) => {
          ({ available } = await this.deps.ledger.summary(principal.account));
          if (length !== null) payable(length);
          // A declared length is held whole before a byte is written; a body of unknown length is held
          // in steps as it arrives, as a chunked upload is (holding the size limit would refuse it on
          // every volume with less than twice that free).
          download = await this.deps.disk.reserve(principal.account, {
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
      const bytes = await this.deps.blobs.putFile(id, 'input', destPath);
      const leave = () => {
        download?.release();
        c.get('upload').release();
      };
      return await this.admit(c, { id, entry, format, fileName: baseName(fetched.fileName), bytes, options, webhook }, leave);
    } finally {
      download?.release();
    }
  }

  private async admit(c: Context<AppEnv>, a: Admission, leaveQueue: () => void): Promise<Response> {
    const { bytes } = a;
    // The body is stored, so the upload's place goes now: the admission counts it as a job from the
    // moment it is indexed (files mode: before its records are durable), and a place still held then
    // would count it twice and turn away a racing upload that has room.
    leaveQueue();
    const admitted = await this.deps.engine.submit({
      id: a.id,
      account: c.get('principal').account,
      jobType: a.entry.jobType,
      format: a.format,
      fileName: a.fileName,
      options: a.options,
      inputBytes: bytes,
      creditCost: creditsFor(a.entry.costing, bytes),
      webhook: a.webhook,
    }, this.idempotency.claim(c));
    return this.idempotency.accepted(c, admitted);
  }
}

/** A request whose idempotency key is bound already is answered here: its body is only hashed, and the answer is the first request's (or 422). */
function replayOrContinue(idempotency: Idempotency, route: string): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const replayed = await idempotency.begin(c, route);
    if (replayed) return replayed;
    await next();
  };
}

/** `POST /compress` and each compressor's own path: idempotency key → upload gate → the body, stored → admission. */
export function submitRoutes(deps: SubmitDeps) {
  const app = new Hono<AppEnv>();
  const idempotency = new Idempotency({
    rememberedKey: (account, key, at) => deps.engine.rememberedKey(account, key, at),
    maxFileSizeBytes: (account) => deps.planOf(account).maxFileSizeBytes,
    clock: deps.clock,
  });
  const submissions = new Submissions(deps, idempotency);
  const gate = { ...deps, slots: new UploadSlots() };
  for (const dedicated of [undefined, ...COMPRESSORS]) {
    const route = dedicated?.path ?? '/compress';
    // One handler made of the three, so that the route list (which the OpenAPI document and allowed methods are read from) has one entry per path.
    app.post(route, every(replayOrContinue(idempotency, route), uploadGate(gate, dedicated), (c: Context<AppEnv>) => submissions.submit(c, dedicated)));
  }
  return app;
}
