import { open, type FileHandle } from 'node:fs/promises';
import { JobError } from '../contract.ts';

const CFB_MAGIC = Buffer.from('d0cf11e0a1b11ae1', 'hex');
const ENDOFCHAIN = 0xfffffffe;
/** Directory sectors walked at most: 4096 sectors hold 16k+ entries, far beyond real files. */
const MAX_DIRECTORY_SECTORS = 4096;

/**
 * Fails with a clear code unless the file is a zip container. A Compound File Binary
 * container with an Office extension is either a password-protected OOXML document (its
 * EncryptionInfo and EncryptedPackage streams, MS-OFFCRYPTO) or a legacy binary .doc/.ppt.
 */
export async function assertZipContainer(path: string): Promise<void> {
  const fh = await open(path, 'r');
  try {
    const head = Buffer.alloc(8);
    const { bytesRead } = await fh.read(head, 0, 8, 0);
    if (bytesRead >= 8 && head.equals(CFB_MAGIC)) {
      const names = await cfbStreamNames(fh).catch(() => [] as string[]);
      if (names.includes('EncryptedPackage') || names.includes('EncryptionInfo')) {
        throw new JobError('office.encrypted', 'The document is password-protected (an encrypted OOXML package); remove the password and submit it again.');
      }
      throw new JobError('office.not_ooxml', 'The file is a legacy binary Office document (Compound File), not an Office Open XML (DOCX/PPTX) package.');
    }
    if (bytesRead < 4 || head.readUInt32LE(0) !== 0x04034b50) {
      throw new JobError('office.not_ooxml', 'The file is not a zip container, so it is not an Office Open XML (DOCX/PPTX) document.');
    }
  } finally {
    await fh.close();
  }
}

/** Names of the directory entries of a CFB file (MS-CFB 2.2, 2.6), following the FAT chain. */
async function cfbStreamNames(fh: FileHandle): Promise<string[]> {
  const header = Buffer.alloc(512);
  await fh.read(header, 0, 512, 0);
  const shift = header.readUInt16LE(30);
  if (shift !== 9 && shift !== 12) return [];
  const sectorSize = 1 << shift;
  const perSector = sectorSize / 4;
  const difat: number[] = [];
  for (let i = 0; i < 109; i++) difat.push(header.readUInt32LE(76 + i * 4));
  let nextDifat = header.readUInt32LE(68);
  const sector = Buffer.alloc(sectorSize);
  const readSector = async (s: number): Promise<Buffer> => {
    const { bytesRead } = await fh.read(sector, 0, sectorSize, (s + 1) * sectorSize);
    if (bytesRead !== sectorSize) throw new Error('truncated compound file');
    return sector;
  };
  const fatEntry = async (s: number): Promise<number> => {
    const index = Math.floor(s / perSector);
    while (index >= difat.length && nextDifat < ENDOFCHAIN && difat.length < 1 << 20) {
      const d = await readSector(nextDifat);
      for (let i = 0; i < perSector - 1; i++) difat.push(d.readUInt32LE(i * 4));
      nextDifat = d.readUInt32LE((perSector - 1) * 4);
    }
    if (index >= difat.length) throw new Error('FAT sector out of range');
    return (await readSector(difat[index])).readUInt32LE((s % perSector) * 4);
  };
  const names: string[] = [];
  let s = header.readUInt32LE(48);
  for (let walked = 0; s < ENDOFCHAIN && walked < MAX_DIRECTORY_SECTORS; walked++) {
    const dir = Buffer.from(await readSector(s));
    for (let o = 0; o + 128 <= sectorSize; o += 128) {
      const nameBytes = dir.readUInt16LE(o + 64);
      if (nameBytes >= 2 && nameBytes <= 64) names.push(dir.toString('utf16le', o, o + nameBytes - 2));
    }
    s = await fatEntry(s);
  }
  return names;
}
