import type { Readable } from 'node:stream';

/**
 * Text chunks of an XML part as it inflates. Package parts are UTF-8 or UTF-16
 * (ECMA-376 Part 2, 8.1.4); the byte-order mark tells which, and the decoder drops it.
 */
export async function* xmlText(stream: Readable): AsyncGenerator<string> {
  let decoder: InstanceType<typeof TextDecoder> | undefined;
  for await (const chunk of stream) {
    const bytes = chunk as Buffer;
    if (!decoder) {
      const utf16 = bytes.length >= 2 && ((bytes[0] === 0xff && bytes[1] === 0xfe) || (bytes[0] === 0xfe && bytes[1] === 0xff));
      decoder = new TextDecoder(utf16 ? (bytes[0] === 0xff ? 'utf-16le' : 'utf-16be') : 'utf-8');
    }
    const text = decoder.decode(bytes, { stream: true });
    if (text) yield text;
  }
  const rest = decoder?.decode();
  if (rest) yield rest;
}

/** The text of a whole (small) XML part, UTF-8 or UTF-16 by its byte-order mark. */
export function decodeXml(bytes: Buffer): string {
  if (bytes.length >= 2 && bytes[0] === 0xff && bytes[1] === 0xfe) return new TextDecoder('utf-16le').decode(bytes);
  if (bytes.length >= 2 && bytes[0] === 0xfe && bytes[1] === 0xff) return new TextDecoder('utf-16be').decode(bytes);
  return new TextDecoder('utf-8').decode(bytes);
}
