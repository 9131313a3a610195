/** The formats the same-format compressors take, told by their first bytes. */
export type ImageKind = 'jpeg' | 'png' | 'gif';

const SIGNATURES: Record<ImageKind, number[]> = {
  jpeg: [0xff, 0xd8, 0xff],
  png: [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a],
  gif: [0x47, 0x49, 0x46, 0x38],
};

/** Whether `head` begins with `kind`'s signature. */
export function hasSignature(head: Buffer, kind: ImageKind): boolean {
  const sig = SIGNATURES[kind];
  return head.length >= sig.length && sig.every((b, i) => head[i] === b);
}

/** The kind whose signature `head` begins with, if any. */
export function kindOf(head: Buffer): ImageKind | undefined {
  return (Object.keys(SIGNATURES) as ImageKind[]).find((kind) => hasSignature(head, kind));
}

/** Whether a file's last bytes (trailing zero padding removed) hold `kind`'s closing marker: EOI, IEND, the trailer. */
export function endsComplete(kind: ImageKind, end: Buffer): boolean {
  if (kind === 'jpeg') return end.lastIndexOf(Buffer.from([0xff, 0xd9])) >= 0;
  if (kind === 'png') return end.lastIndexOf('IEND') >= 0;
  return end.at(-1) === 0x3b;
}
