/**
 * One real corpus file for each compressor and each universal input kind (paths under the corpus):
 * what the binary and Docker tests push through a whole build to prove every codec made it in.
 */
export const ONE_OF_EACH_KIND = [
  'jpg/baiona_cmyk.jpg',
  'png/density_plot.png',
  'gif/file-type-fixture.gif',
  'webp/derived-exifr-logo-lossless-alpha.webp',
  'avif/Irvine_CA.avif',
  'heic/IMG_2682.heic',
  'raw/canon-eos-6d-photoprism-lossy.dng',
  'bmp/file-type-fixture.bmp',
  'pdf/ocrmypdf-cardinal-scan.pdf',
  'docx/python-docx-inline-shapes.docx',
  'pptx/python-pptx-shp-picture.pptx',
];

/**
 * The same kinds for a run under qemu-user, where a picture costs 15-30 times its native time: the
 * WebP is a 600 × 315 lossy photo instead of the 1.4 MP lossless logo with alpha (95 s there on its
 * own). The logo's path (alpha kept, a palette judged over two backgrounds) is the x64 runs'.
 */
export const ONE_OF_EACH_KIND_EMULATED = ONE_OF_EACH_KIND.map((s) => (s.startsWith('webp/') ? 'webp/denali.webp' : s));
