import { getRequestListener, RequestError } from '@hono/node-server';
import { createServer, type Server } from 'node:http';
import type { Duplex } from 'node:stream';

const ANSWERS: Record<string, [status: number, reason: string, code: string, detail: string]> = {
  HPE_HEADER_OVERFLOW: [431, 'Request Header Fields Too Large', 'request.headers_too_large', 'The request line and headers exceed 16 KB.'],
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'Request Timeout', 'request.timeout', 'The request headers did not arrive in time.'],
};

/** Writes one error envelope straight to the socket and closes it. */
function answerOnSocket(socket: Duplex, status: number, reason: string, code: string, detail: string): void {
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
  const [status, reason, code, detail] = ANSWERS[err.code ?? ''] ?? [400, 'Bad Request', 'request.malformed', `The request is not valid HTTP/1.1 (${err.code ?? 'parse error'}).`];
  answerOnSocket(socket, status, reason, code, detail);
}

/** `CONNECT` (a proxy tunnel request) is not something this server offers: 405 instead of a silently dropped socket. */
function refuseConnect(_req: unknown, socket: Duplex): void {
  socket.on('error', () => socket.destroy());
  answerOnSocket(socket, 405, 'Method Not Allowed', 'request.method_not_allowed', 'CONNECT is not supported.');
}

/**
 * Answers a request the adapter could not turn into a fetch Request (no Host header, a
 * request target like `*` or `http://other/`, a backslash in the path) with the envelope.
 */
function answerRequestError(err: unknown): Response {
  const detail = err instanceof RequestError ? err.message : 'The request could not be read.';
  return Response.json({ error: 'request.malformed', detail: `${detail}.` }, { status: 400 });
}

/**
 * The HTTP server in front of the app: every request it cannot serve, from a byte stream that
 * is not HTTP to a request the app never sees, is answered in the error envelope. A missing
 * Host header is answered by the adapter (400 `request.malformed`) rather than by Node's bare 400.
 */
export function createHttpServer(fetch: Parameters<typeof getRequestListener>[0]): Server {
  const server = createServer({ requireHostHeader: false }, getRequestListener(fetch, { errorHandler: answerRequestError }));
  server.on('clientError', answerClientError);
  server.on('connect', refuseConnect);
  return server;
}
