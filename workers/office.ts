import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { contentTypeOf, normaliseFormat } from '../src/catalog/index.ts';
import type { Compress } from './contract.ts';
import { analyzePackage } from './office/analyze.ts';
import { openOfficePackage } from './office/package.ts';
import { planPictures } from './office/plan.ts';
import { assertZipContainer } from './office/sniff.ts';
import { writePackage } from './office/write.ts';
import { keepInputUnlessSmaller } from './shared/never-larger.ts';

/**
 * `document.office-compress`: DOCX and PPTX with their pictures recompressed (and right-sized to
 * the size they are shown at), their XML re-deflated, and everything else carried over byte for
 * byte. Failures: office.not_ooxml, office.encrypted, office.zip_bomb, office.unsafe_entry_name,
 * office.damaged (see docs/compressors.md: Office compressor).
 */
export const compress: Compress = async (job, out, ctx) => {
  const format = normaliseFormat(job.format);
  const outPath = join(out.dir, `compressed.${format}`);
  ctx.progress(0, 'analyzing');
  await assertZipContainer(job.inputPath);
  const pkg = await openOfficePackage(job.inputPath);
  let perceived: number | undefined;
  try {
    const analysis = await analyzePackage(pkg, ctx.signal);
    const budget = await planPictures(pkg, analysis, job.options.resize, ctx.signal);
    ({ perceived } = await writePackage(pkg, analysis, { outPath, resize: job.options.resize, budget, ctx }));
  } catch (err) {
    await rm(outPath, { force: true });
    throw err;
  } finally {
    pkg.zip.close();
  }
  ctx.progress(PROGRESS_FINALIZING, 'finalizing');
  const keptInput = await keepInputUnlessSmaller(job.inputPath, outPath);
  ctx.progress(100, 'finalizing');
  return { path: outPath, format, contentType: contentTypeOf(format), ...(keptInput || perceived === undefined ? {} : { perceivedQuality: perceived }) };
};

const PROGRESS_FINALIZING = 96;
