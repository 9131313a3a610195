import { nativeDecoder, runForOutput } from '../decoders/native-program.ts';
import { servingPool } from '../decoders/served.ts';
import type { Pixels } from './ssim.ts';

/**
 * jpegli, the JPEG XL project's JPEG encoder, as the JPEG search's second encoder beside mozjpeg
 * (encode.ts: chooseForm). Its tables and its adaptive quantisation (coarser where texture hides
 * the loss, finer on smooth areas) make some pictures several per cent smaller than any of
 * mozjpeg's table sets at equal SSIMULACRA2, and it encodes a 12 MP picture in about half
 * mozjpeg's time. A program of ours (jpegli/encode.cc, built with jpegli from Debian's sources by
 * scripts/jpegli.mjs), kept serving the thread's encodes (served.ts), the pixels in as a PPM or PGM,
 * the JPEG out, or run once per encode where it cannot be kept; where it does not load, the search
 * compares mozjpeg's forms alone.
 */
const jpegli = nativeDecoder('jpegli', { program: 'compressd-jpegli', events: 'jpegli' }, "JPEGs are encoded with mozjpeg's forms alone: jpegli does not load here", 'jpegli');

/** Tests point it at another directory (a broken one: the search without it). */
export const useJpegli = jpegli.use;

export async function jpegliAvailable(): Promise<boolean> {
  return (await jpegli.get()) !== undefined;
}

/** Raised when jpegli loaded but an encode failed: the caller encodes with mozjpeg instead. */
export class JpegliFailed extends Error {}

const serve = servingPool((why) => new JpegliFailed(`compressd-jpegli: ${why}`));

/** One component for one channel (a grey picture), else three; no APPn segment (the caller writes the metadata). */
export async function encodeJpegli(p: Pixels, quality: number, chroma: '4:2:0' | '4:4:4'): Promise<Buffer> {
  const program = await jpegli.get();
  if (!program) throw new JpegliFailed('jpegli does not load here');
  if (p.channels !== 1 && p.channels !== 3) throw new JpegliFailed(`jpegli encodes 1 or 3 channels, not ${p.channels}`);
  const header = Buffer.from(`P${p.channels === 1 ? 5 : 6}\n${p.width} ${p.height}\n255\n`, 'latin1');
  const pixels = Buffer.from(p.data.buffer, p.data.byteOffset, p.data.byteLength);
  const form = chroma === '4:2:0' ? '420' : '444';
  const served = await serve(program, [Buffer.from(`${quality} ${form}\n`, 'latin1'), header, pixels]);
  if (served) return served;
  const ended = await runForOutput(program, [String(quality), form], { input: Buffer.concat([header, pixels]) });
  if (ended.code !== 0 || ended.out.length === 0) throw new JpegliFailed(`compressd-jpegli ended with ${ended.code ?? ended.signal}: ${ended.err}`);
  return ended.out;
}
