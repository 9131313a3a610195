import { createHash } from 'node:crypto';
import type { Context } from 'hono';
import type { Clock } from '../clock.ts';
import { ApiError } from '../errors.ts';
import type { IdempotencyClaim, RememberedKey } from '../jobs/backend.ts';
import { idempotencyInProgress, idempotencyMismatch } from '../jobs/idempotency.ts';
import type { Job } from '../jobs/types.ts';
import type { AppEnv } from './env.ts';
import { receiveJson, receiveMultipart, type ReceivedUpload, type UploadRules } from './multipart.ts';
import { acceptedView } from './views.ts';

/** Stripe's bound on a key's length. */
const MAX_KEY_LENGTH = 255;

/** A request's content, as compared between two requests with one key. */
type Canonical =
  | { kind: 'multipart'; fields: Record<string, string>; file: { name: string; sha256: string } | null }
  | { kind: 'json'; body: unknown }
  | { kind: 'other'; contentType: string };

/** A request with a key that is not bound yet: it binds it if its job is admitted. */
interface Ticket {
  key: string;
  route: string;
  fingerprint?: string;
  /** Frees the key for other requests on this node. */
  release(): void;
}

export interface IdempotencyDeps {
  rememberedKey(account: string, key: string, at: Date): Promise<RememberedKey | undefined>;
  maxFileSizeBytes(account: string): number;
  /** What a key's 24 hours are measured by. */
  clock: Clock;
}

function validKey(raw: string): string {
  // Node already strips the spaces around a header value.
  if (raw.length === 0 || raw.length > MAX_KEY_LENGTH || !/^[\x20-\x7e]+$/.test(raw)) {
    throw new ApiError('request.invalid_idempotency_key', 400, `Idempotency-Key must be 1 to ${MAX_KEY_LENGTH} printable ASCII characters.`);
  }
  return raw;
}

/** Text written as is between the values of `canonicalJson`'s stack. */
class Literal {
  constructor(readonly text: string) {}
}

/**
 * JSON with object keys sorted at every depth, so field order never changes a fingerprint. A loop
 * over a stack, not recursion: any body JSON.parse accepts (100,000 levels deep) has a fingerprint,
 * where recursion ran out of stack at a few thousand and answered 500. Its output is the same as
 * the recursive form's, so keys bound before keep their fingerprints.
 */
function canonicalJson(value: unknown): string {
  const out: string[] = [];
  const stack: unknown[] = [value];
  /** Pushes `[open, …items with separators…, close]` to be popped in that order. */
  const enclose = (open: string, items: unknown[], close: string) => {
    stack.push(new Literal(close));
    for (let i = items.length - 1; i >= 0; i--) stack.push(items[i]);
    stack.push(new Literal(open));
  };
  while (stack.length > 0) {
    const v = stack.pop();
    if (v instanceof Literal) out.push(v.text);
    else if (Array.isArray(v)) enclose('[', v.flatMap((item, i) => (i === 0 ? [item] : [new Literal(','), item])), ']');
    else if (v && typeof v === 'object') {
      const entries = Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      enclose('{', entries.flatMap(([k, item], i) => [new Literal(`${i === 0 ? '' : ','}${JSON.stringify(k)}:`), item]), '}');
    } else out.push(JSON.stringify(v));
  }
  return out.join('');
}

const fingerprintOf = (route: string, request: Canonical) => createHash('sha256').update(canonicalJson({ route, request })).digest('hex');

function canonicalUpload(upload: ReceivedUpload): Canonical {
  return { kind: 'multipart', fields: upload.fields, file: upload.file && { name: upload.file.name, sha256: upload.file.sha256! } };
}

/**
 * `Idempotency-Key` on submissions, as Stripe defines it. The same key from the same account
 * within 24 h answers the job the first request admitted (202, same body, one charge); with a
 * different request (path, fields, file name or bytes, JSON body) 422; while the first is still
 * received or admitted on this node 409. A key is bound only when its job is admitted, in the
 * same atomic step (`JobStore.admit`): a refused request leaves the key free for a retry.
 */
export class Idempotency {
  /** Keys whose first request this node is receiving or admitting, each with its request's token. */
  private readonly inFlight = new Map<string, object>();
  private readonly tickets = new WeakMap<Context<AppEnv>, Ticket>();

  constructor(private readonly deps: IdempotencyDeps) {}

  /**
   * The first step of a submission. No header: undefined, nothing changes. A key already bound:
   * the body is read through the fingerprint (nothing is stored) and the answer is the replay or
   * 422. A new key: undefined, and the request goes on as a ticket (the receivers below hash
   * what they receive; `claim` gives what `admit` binds).
   */
  async begin(c: Context<AppEnv>, route: string): Promise<Response | undefined> {
    const raw = c.req.header('idempotency-key');
    if (raw === undefined) return undefined;
    const key = validKey(raw);
    const account = c.get('principal').account;
    const slot = JSON.stringify([account, key]);
    if (this.inFlight.has(slot)) throw idempotencyInProgress();
    const remembered = await this.deps.rememberedKey(account, key, this.deps.clock());
    if (remembered) {
      if ((await this.fingerprintBody(c, route)) !== remembered.fingerprint) throw idempotencyMismatch();
      return this.replay(c, remembered);
    }
    if (this.inFlight.has(slot)) throw idempotencyInProgress();
    const token = {};
    this.inFlight.set(slot, token);
    // Freed by the answer being written ('finish') or the client leaving ('close'), or earlier by `accepted`.
    const release = () => void (this.inFlight.get(slot) === token && this.inFlight.delete(slot));
    c.env.outgoing.once('finish', release).once('close', release);
    this.tickets.set(c, { key, route, release });
    return undefined;
  }

  /** `receiveMultipart`, hashing the file when the request has a key. */
  async receiveMultipart(c: Context<AppEnv>, rules: UploadRules): Promise<ReceivedUpload> {
    const ticket = this.tickets.get(c);
    const upload = await receiveMultipart(c.env.incoming, { ...rules, digest: ticket !== undefined });
    if (ticket) ticket.fingerprint = fingerprintOf(ticket.route, canonicalUpload(upload));
    return upload;
  }

  /** `receiveJson`, fingerprinting the body when the request has a key. */
  async receiveJson(c: Context<AppEnv>): Promise<Record<string, unknown>> {
    const ticket = this.tickets.get(c);
    const body = await receiveJson(c.env.incoming);
    if (ticket) ticket.fingerprint = fingerprintOf(ticket.route, { kind: 'json', body });
    return body;
  }

  /** What the admission binds: the key and the received request's fingerprint; undefined without a key. */
  claim(c: Context<AppEnv>): IdempotencyClaim | undefined {
    const ticket = this.tickets.get(c);
    return ticket && { key: ticket.key, fingerprint: ticket.fingerprint! };
  }

  /** The 202 of an admission: the new job, or the job another request with this key admitted first. */
  accepted(c: Context<AppEnv>, admitted: Job | RememberedKey): Response {
    // The key is bound in the store now: a retry is answered from there.
    this.tickets.get(c)?.release();
    return 'fingerprint' in admitted ? this.replay(c, admitted) : c.json(acceptedView(admitted), 202);
  }

  /** The first request's answer again, marked as Stripe marks it. */
  private replay(c: Context<AppEnv>, remembered: RememberedKey): Response {
    c.header('Idempotent-Replayed', 'true');
    return c.json(acceptedView(remembered.job), 202);
  }

  /** Reads the whole body (bounded by the size limit) into its fingerprint, keeping none of it. */
  private async fingerprintBody(c: Context<AppEnv>, route: string): Promise<string> {
    const contentType = (c.req.header('content-type') ?? '').toLowerCase();
    if (contentType.startsWith('application/json')) return fingerprintOf(route, { kind: 'json', body: await receiveJson(c.env.incoming) });
    if (!contentType.startsWith('multipart/form-data')) return fingerprintOf(route, { kind: 'other', contentType });
    const upload = await receiveMultipart(c.env.incoming, {
      maxBytes: this.deps.maxFileSizeBytes(c.get('principal').account),
      accept: () => {},
      destination: async () => null,
      digest: true,
    });
    return fingerprintOf(route, canonicalUpload(upload));
  }
}
