import { randomBytes } from 'node:crypto';
import type { Payload } from './http.ts';

/**
 * A multipart/form-data body written by hand rather than by FormData, so that it can be sent as a
 * stream (the upload never sits whole in memory, and its progress re-arms the request timeout)
 * while keeping a Content-Length whenever the file's size is known.
 */
function frame(fields: Record<string, string>, fileName: string): { head: string; tail: string; contentType: string } {
  const boundary = `compressd-${randomBytes(16).toString('hex')}`;
  const quoted = (s: string) => s.replace(/[\r\n"]/g, (c) => encodeURIComponent(c));
  let head = '';
  for (const [name, value] of Object.entries(fields)) head += `--${boundary}\r\nContent-Disposition: form-data; name="${quoted(name)}"\r\n\r\n${value}\r\n`;
  head += `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${quoted(fileName)}"\r\nContent-Type: application/octet-stream\r\n\r\n`;
  return { head, tail: `\r\n--${boundary}--\r\n`, contentType: `multipart/form-data; boundary=${boundary}` };
}

/** @internal A Blob's upload: replayable, with its length (the parts of a file-backed Blob are read lazily). */
export function blobForm(fields: Record<string, string>, fileName: string, file: Blob): Payload {
  const { head, tail, contentType } = frame(fields, fileName);
  const whole = new Blob([head, file, tail]);
  return { contentType, replayable: true, open: () => ({ body: whole.stream(), length: whole.size }) };
}

/** @internal A stream's upload: sent as it is read, once (a stream cannot be replayed), without a length. */
export function streamForm(fields: Record<string, string>, fileName: string, file: ReadableStream<Uint8Array>): Payload {
  const { head, tail, contentType } = frame(fields, fileName);
  const encoder = new TextEncoder();
  const open = () => {
    const reader = file.getReader();
    let sentHead = false;
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        if (!sentHead) {
          sentHead = true;
          controller.enqueue(encoder.encode(head));
          return;
        }
        const { done, value } = await reader.read();
        if (done) {
          controller.enqueue(encoder.encode(tail));
          controller.close();
        } else controller.enqueue(value);
      },
      cancel(reason) {
        return reader.cancel(reason);
      },
    });
    return { body };
  };
  return { contentType, replayable: false, open };
}
