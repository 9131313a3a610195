import { copyFile, stat } from 'node:fs/promises';

/**
 * The never-larger rule: when a candidate output does not beat the input by at least
 * `minSaving` (a fraction), the input itself is the output, byte for byte. Returning the
 * input also avoids a second generation loss on a file that is already optimised.
 * Returns true when the input was kept.
 */
export async function keepInputUnlessSmaller(inputPath: string, candidatePath: string, minSaving = 0): Promise<boolean> {
  const [inSize, outSize] = await Promise.all([stat(inputPath).then((s) => s.size), stat(candidatePath).then((s) => s.size)]);
  if (outSize < inSize * (1 - minSaving) && outSize < inSize) return false;
  await copyFile(inputPath, candidatePath);
  return true;
}
