// jpegli, the JPEG encoder of the JPEG XL project (scripts/jpegli.mjs builds it with Debian's sources),
// on a binary PPM (P6) or PGM (P5) read from standard input, the JPEG written to standard output.
// The JPEG search (workers/image/jpegli.ts) compares it with mozjpeg's table sets per picture; the
// quality benchmark runs it as a peer.
//
//   compressd-jpegli QUALITY 444|420 < picture.ppm > picture.jpg
//   compressd-jpegli --serve
//   compressd-jpegli --version
//
// Serving, it encodes one picture after another until its input ends: each request a line
// "QUALITY 444|420" and the picture, each answer a line "ok SIZE" and the JPEG, or a line "error WHY",
// after which it exits. A search asks for several encodes of one picture, and a process started for
// each cost some 7-15 ms of a 5-50 ms encode (workers/decoders/served.ts).
//
// As jpegli's own cjpegli: the quality mapped to jpegli's distance, adaptive quantisation, progressive
// level 2 and optimised Huffman codes. No APPn segment of its own (no JFIF): the caller writes the input's.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "lib/jpegli/encode.h"

static int fail(const char* why) {
  fprintf(stderr, "compressd-jpegli: %s\n", why);
  return 1;
}

static bool number(int* out) {
  int c = getchar();
  while (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '#') {
    if (c == '#') while (c != '\n' && c != EOF) c = getchar();
    c = getchar();
  }
  long v = 0;
  if (c < '0' || c > '9') return false;
  while (c >= '0' && c <= '9') {
    v = v * 10 + (c - '0');
    if (v > 1 << 20) return false;
    c = getchar();
  }
  *out = static_cast<int>(v);
  return true;
}

// The luminance table jpegli makes for a colour picture at `distance` (natural order). For one
// component jpegli takes the standard tables, scaled linearly as libjpeg scales them; with its own
// YCbCr luminance table a grey text scan's file at SSIMULACRA2 79.3 is about 14 % smaller (118 against
// 137 KB, interpolated between qualities 75-85), and jpegli then wins on small grey pictures.
static void colour_luma_table(float distance, bool subsampled, unsigned int table[DCTSIZE2]) {
  jpeg_compress_struct cinfo;
  jpeg_error_mgr jerr;
  cinfo.err = jpegli_std_error(&jerr);
  jpegli_create_compress(&cinfo);
  cinfo.input_components = 3;
  cinfo.in_color_space = JCS_RGB;
  jpegli_set_defaults(&cinfo);
  cinfo.comp_info[0].h_samp_factor = cinfo.comp_info[0].v_samp_factor = subsampled ? 2 : 1;
  jpegli_set_distance(&cinfo, distance, TRUE);
  for (int k = 0; k < DCTSIZE2; k++) table[k] = cinfo.quant_tbl_ptrs[0]->quantval[k];
  jpegli_destroy_compress(&cinfo);
}

// Reads one request's picture from standard input and encodes it into `jpeg`; the reason when it cannot.
static const char* encode(int quality, bool subsampled, std::vector<unsigned char>* jpeg) {
  if (quality < 1 || quality > 100) return "QUALITY is 1-100, the chroma 444 or 420";
  int width = 0, height = 0, maxval = 0;
  if (getchar() != 'P') return "not a binary PPM or PGM";
  const int kind = getchar();
  if ((kind != '6' && kind != '5') || !number(&width) || !number(&height) || !number(&maxval) || maxval != 255 || width < 1 || height < 1) return "not an 8-bit binary PPM or PGM";
  const int channels = kind == '6' ? 3 : 1;
  std::vector<unsigned char> pixels(static_cast<size_t>(width) * height * channels);
  if (fread(pixels.data(), 1, pixels.size(), stdin) != pixels.size()) return "the picture ends early";

  jpeg_compress_struct cinfo;
  jpeg_error_mgr jerr;
  cinfo.err = jpegli_std_error(&jerr);
  jpegli_create_compress(&cinfo);
  unsigned char* out = nullptr;
  unsigned long size = 0;
  jpegli_mem_dest(&cinfo, &out, &size);
  cinfo.image_width = width;
  cinfo.image_height = height;
  cinfo.input_components = channels;
  cinfo.in_color_space = channels == 3 ? JCS_RGB : JCS_GRAYSCALE;
  jpegli_set_defaults(&cinfo);
  if (channels == 3) {
    cinfo.comp_info[0].h_samp_factor = cinfo.comp_info[0].v_samp_factor = subsampled ? 2 : 1;
    for (int i = 1; i < 3; i++) cinfo.comp_info[i].h_samp_factor = cinfo.comp_info[i].v_samp_factor = 1;
  }
  jpegli_enable_adaptive_quantization(&cinfo, TRUE);
  const float distance = jpegli_quality_to_distance(quality);
  jpegli_set_distance(&cinfo, distance, TRUE);
  if (channels == 1) {
    unsigned int table[DCTSIZE2];
    colour_luma_table(distance, subsampled, table);
    jpegli_add_quant_table(&cinfo, 0, table, 100, TRUE);
  }
  jpegli_set_progressive_level(&cinfo, 2);
  cinfo.optimize_coding = TRUE;
  cinfo.write_JFIF_header = FALSE;
  cinfo.write_Adobe_marker = FALSE;
  jpegli_start_compress(&cinfo, TRUE);
  for (int y = 0; y < height; y++) {
    JSAMPROW row = pixels.data() + static_cast<size_t>(y) * width * channels;
    jpegli_write_scanlines(&cinfo, &row, 1);
  }
  jpegli_finish_compress(&cinfo);
  jpegli_destroy_compress(&cinfo);
  jpeg->assign(out, out + size);
  free(out);
  return nullptr;
}

// The chroma argument: 420 subsampled, 444 not; false for anything else.
static bool chroma(const char* s, bool* subsampled) {
  *subsampled = strcmp(s, "420") == 0;
  return *subsampled || strcmp(s, "444") == 0;
}

static int serve() {
  std::vector<unsigned char> jpeg;
  for (;;) {
    int c = getchar();
    if (c == EOF) return 0;
    ungetc(c, stdin);
    int quality = 0;
    char form[4] = {0};
    bool subsampled = false;
    // number() takes the space after the quality.
    const char* why = !number(&quality) || fread(form, 1, 3, stdin) != 3 || getchar() != '\n' || !chroma(form, &subsampled)
                          ? "a request is a line QUALITY 444|420, then the picture"
                          : encode(quality, subsampled, &jpeg);
    if (why) {
      printf("error %s\n", why);
      fflush(stdout);
      return 1;
    }
    printf("ok %zu\n", jpeg.size());
    if (fwrite(jpeg.data(), 1, jpeg.size(), stdout) != jpeg.size() || fflush(stdout) != 0) return fail("cannot write the JPEG");
  }
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "--version") == 0) {
    // The jpeg-xl release jpegli comes from (scripts/jpegli.mjs); jpegli has no version of its own.
    puts(JPEGLI_VERSION);
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "--serve") == 0) return serve();
  bool subsampled = false;
  if (argc != 3 || !chroma(argv[2], &subsampled)) return fail("usage: compressd-jpegli QUALITY 444|420 < picture.ppm > picture.jpg");
  std::vector<unsigned char> jpeg;
  if (const char* why = encode(atoi(argv[1]), subsampled, &jpeg)) return fail(why);
  return fwrite(jpeg.data(), 1, jpeg.size(), stdout) == jpeg.size() && fflush(stdout) == 0 ? 0 : fail("cannot write the JPEG");
}
