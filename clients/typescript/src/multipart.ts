import { randomBytes } from 'node:crypto';

/**
 * A multipart/form-data body whose file part is a stream, sent as it is read: the upload never
 * sits whole in memory. (FormData needs a Blob, which a stream is not.)
 */
export function streamingForm(fields: Record<string, string>, fileName: string, file: ReadableStream<Uint8Array>): { body: ReadableStream<Uint8Array>; contentType: string } {
  const boundary = `compressd-${randomBytes(16).toString('hex')}`;
  const quoted = (s: string) => s.replace(/[\r\n"]/g, (c) => encodeURIComponent(c));
  let head = '';
  for (const [name, value] of Object.entries(fields)) head += `--${boundary}\r\nContent-Disposition: form-data; name="${quoted(name)}"\r\n\r\n${value}\r\n`;
  head += `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${quoted(fileName)}"\r\nContent-Type: application/octet-stream\r\n\r\n`;
  const encoder = new TextEncoder();
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
        controller.enqueue(encoder.encode(`\r\n--${boundary}--\r\n`));
        controller.close();
      } else controller.enqueue(value);
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
  return { body, contentType: `multipart/form-data; boundary=${boundary}` };
}
