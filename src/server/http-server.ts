import { getRequestListener, RequestError } from '@hono/node-server';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';

/** An answer written straight to the socket: its status line and its error envelope. */
interface SocketAnswer {
  status: number;
  reason: string;
  code: string;
  detail: string;
}

const ANSWERS: Record<string, SocketAnswer> = {
  HPE_HEADER_OVERFLOW: { status: 431, reason: 'Request Header Fields Too Large', code: 'request.headers_too_large', detail: 'The request line and headers exceed 16 KB.' },
  ERR_HTTP_REQUEST_TIMEOUT: { status: 408, reason: 'Request Timeout', code: 'request.timeout', detail: 'The request headers did not arrive in time.' },
};

/** How long a closed-off socket may linger for the client to read its 408 before it is dropped. */
const LINGER_MS = 1000;

/** Writes one error envelope straight to the socket and closes it. */
function answerOnSocket(socket: Duplex, { status, reason, code, detail }: SocketAnswer): void {
  const body = JSON.stringify({ error: code, detail });
  socket.end(`HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
}

/**
 * Answers a request Node's HTTP parser refused before it reached the app (bad framing,
 * invalid characters, conflicting lengths, oversized headers) with the spec's error envelope
 * instead of a bare status line, then closes the connection: after a framing error the
 * rest of the stream cannot be trusted.
 */
function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  const answered = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent;
  if (err.code === 'ECONNRESET' || !socket.writable || answered) {
    socket.destroy();
    return;
  }
  answerOnSocket(
    socket,
    ANSWERS[err.code ?? ''] ?? { status: 400, reason: 'Bad Request', code: 'request.malformed', detail: `The request is not valid HTTP/1.1 (${err.code ?? 'parse error'}).` },
  );
}

/** `CONNECT` (a proxy tunnel request) is not something this server offers: 405 instead of a silently dropped socket. */
function refuseConnect(_req: unknown, socket: Duplex): void {
  socket.on('error', () => socket.destroy());
  answerOnSocket(socket, { status: 405, reason: 'Method Not Allowed', code: 'request.method_not_allowed', detail: 'CONNECT is not supported.' });
}

/**
 * Answers a request the adapter could not turn into a fetch Request (no Host header, a
 * request target like `*` or `http://other/`, a backslash in the path) with the envelope.
 */
function answerRequestError(err: unknown): Response {
  const detail = err instanceof RequestError ? err.message : 'The request could not be read.';
  return Response.json({ error: 'request.malformed', detail: `${detail}.` }, { status: 400 });
}

/** How a request body must arrive: never silent for `idleMs`, and on average at least `minBytesPerSecond` once `idleMs` has passed. */
export interface BodyPace {
  idleMs: number;
  /** 0: no minimum rate. */
  minBytesPerSecond: number;
}

/**
 * Ends a request whose client stopped sending its body, or sends it too slowly to finish: no byte
 * for `idleMs`, or fewer than `minBytesPerSecond` on average past a grace of `idleMs` (the body's
 * deadline grows with each byte that arrives). Without the rate one byte now and then would hold
 * the socket, the spool file and the upload's disk reservation for ever (issue 41); with it a large
 * upload on a slow link still gets the time its size needs. Time only counts while the body is
 * flowing, so time the app spends before it reads the body, or pauses to let the disk catch up, is
 * never the client's fault; and a URL download the request waits on is not a body at all. The
 * client gets 408 in the envelope when no answer has started; the app sees an aborted body and
 * cleans up (releasing the reservation) as for a hang-up.
 */
function watchBody(req: IncomingMessage, res: ServerResponse, pace: BodyPace): void {
  if (req.complete || (req.headers['content-length'] === undefined && req.headers['transfer-encoding'] === undefined)) return;
  const socket = req.socket;
  const first = socket.bytesRead;
  let seen = first;
  // Elapsed time, not the service clock's: the watch runs on real timers, and a test clock moved
  // forward would read as a silent body and cut an upload that is arriving.
  let quietSince = performance.now();
  let tick = quietSince;
  let flowingMs = 0;
  const timer = setInterval(() => {
    if (req.complete || req.destroyed) return clearInterval(timer);
    const now = performance.now();
    const flowing = req.readableFlowing === true;
    if (flowing) flowingMs += now - tick;
    tick = now;
    const slow = pace.minBytesPerSecond > 0 && flowingMs > pace.idleMs && socket.bytesRead - first < ((flowingMs - pace.idleMs) / 1000) * pace.minBytesPerSecond;
    if (!slow && (socket.bytesRead !== seen || !flowing)) {
      seen = socket.bytesRead;
      quietSince = now;
      return;
    }
    if (!slow && now - quietSince < pace.idleMs) return;
    clearInterval(timer);
    const detail = slow
      ? `The request body arrived slower than ${pace.minBytesPerSecond} bytes per second.`
      : `No part of the request body arrived for ${Math.round(pace.idleMs / 100) / 10} s.`;
    if (!res.headersSent) answerOnSocket(socket, { status: 408, reason: 'Request Timeout', code: 'request.timeout', detail });
    setTimeout(() => socket.destroy(), LINGER_MS).unref();
    req.destroy();
  }, Math.max(50, Math.min(1000, pace.idleMs / 4)));
  timer.unref();
  res.once('close', () => clearInterval(timer));
}

/**
 * The HTTP server in front of the app: every request it cannot serve, from a byte stream that
 * is not HTTP to a request the app never sees, is answered in the error envelope. A missing
 * Host header is answered by the adapter (400 `request.malformed`) rather than by Node's bare 400.
 */
export function createHttpServer(fetch: Parameters<typeof getRequestListener>[0], pace: BodyPace): Server {
  const listener = getRequestListener(fetch, { errorHandler: answerRequestError });
  const server = createServer({ requireHostHeader: false }, (req, res) => {
    watchBody(req, res, pace);
    return listener(req, res);
  });
  server.on('clientError', answerClientError);
  server.on('connect', refuseConnect);
  return server;
}
