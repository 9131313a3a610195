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
  'bmp/file-type-fixture.bmp',
  'pdf/ocrmypdf-cardinal-scan.pdf',
  'docx/python-docx-inline-shapes.docx',
  'pptx/python-pptx-shp-picture.pptx',
];
