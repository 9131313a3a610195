import yauzl from 'yauzl';

/** Every entry of a zip (a DOCX, a PPTX, the page's ZIP download) by name, sizes checked as they inflate. */
export async function unzip(bytes: Buffer): Promise<Map<string, Buffer>> {
  const zip = await yauzl.fromBufferPromise(bytes, { lazyEntries: true, validateEntrySizes: true });
  const files = new Map<string, Buffer>();
  for await (const entry of zip.eachEntry()) {
    const chunks: Buffer[] = [];
    for await (const c of await zip.openReadStreamPromise(entry)) chunks.push(c as Buffer);
    files.set(entry.fileName, Buffer.concat(chunks));
  }
  return files;
}
