/*
 * compressd-raw-decode: develops a camera RAW file read from stdin with Debian's LibRaw, as
 * workers/decoders/raw.ts asks of LibRaw in WebAssembly (dcraw's development: AHD, the camera's white
 * balance and matrix to sRGB, the orientation applied, full size, 8 bits), and writes the picture to
 * stdout as a PAM (P7) image, GRAYSCALE or RGB. Comment lines in its header carry what the EXIF of the
 * output is made from. workers/decoders/raw-native.ts runs it; a separate
 * process, so that a fault of LibRaw on a hostile file ends this program, not the server.
 *
 *   compressd-raw-decode MAX_PIXELS PIXELS_PER_BYTE BASE_BYTES BYTES_PER_PIXEL
 *       develop (OMP_NUM_THREADS bounds LibRaw's threads; BASE_BYTES + BYTES_PER_PIXEL × the sensor's
 *       pixels, beside the file, its memory: native-memory.h)
 *   compressd-raw-decode --version                    print LibRaw's version (proves the libraries load)
 *
 * Exit status and the one line on stderr:
 *   0  the PAM image is on stdout
 *   1  "open: <LibRaw's message>", "unpack: …", "process: …": LibRaw refused or failed
 *   2  "usage" or "input: <reason>" or "output: <reason>"
 *   3  "pixels WIDTH HEIGHT": the sensor image is over MAX_PIXELS; nothing was unpacked
 *   4  "data: <what>": LibRaw reported cut or corrupt sensor data (the caller decides what then)
 *   5  "sparse WIDTH HEIGHT": the file has fewer bytes than the sensor's pixels / PIXELS_PER_BYTE, too
 *      few to hold its image (raw.ts, MIN_PIXELS_PER_BYTE); nothing was unpacked
 *   6  "memory BOUND": an allocation or a thread past the memory's bound (native-memory.h)
 */
#include "../native-memory.h"
#include <libraw/libraw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "../native-io.h"

/* LibRaw's data-error callback: its default prints and goes on, developing noise from what is missing. */
static int data_errors = 0;
static void on_data_error(void *unused, const char *file, const int offset) {
  (void)unused;
  (void)file;
  if (data_errors++ == 0) fprintf(stderr, "data: %s\n", offset < 0 ? "unexpected end of file" : "corrupt data");
}

/* A text field of the header's comments: printable ASCII only, as the EXIF it becomes is. */
static void comment(char *out, size_t cap, const char *name, const char *value) {
  size_t n = (size_t)snprintf(out, cap, "# %s ", name);
  for (const char *c = value; *c && n + 2 < cap; c++) out[n++] = (*c >= 0x20 && *c < 0x7f) ? *c : '?';
  out[n++] = '\n';
  out[n] = 0;
}

static int write_pam(const libraw_data_t *raw, const libraw_processed_image_t *img) {
  if (img->type != LIBRAW_IMAGE_BITMAP || img->bits != 8 || (img->colors != 1 && img->colors != 3)) return fail(1, "process", "LibRaw returned no 8-bit bitmap");
  char header[1024], make[80], model[80], artist[80];
  comment(make, sizeof make, "make", raw->idata.make);
  comment(model, sizeof model, "model", raw->idata.model);
  comment(artist, sizeof artist, "artist", raw->other.artist);
  int n = snprintf(header, sizeof header,
                   "P7\n%s%s%s# iso %.6g\n# shutter %.6g\n# aperture %.6g\n# focal %.6g\n# timestamp %lld\n"
                   "WIDTH %d\nHEIGHT %d\nDEPTH %d\nMAXVAL 255\nTUPLTYPE %s\nENDHDR\n",
                   make, model, artist, raw->other.iso_speed, raw->other.shutter, raw->other.aperture,
                   raw->other.focal_len, (long long)raw->other.timestamp, img->width, img->height, img->colors,
                   img->colors == 1 ? "GRAYSCALE" : "RGB");
  if (n <= 0 || (size_t)n >= sizeof header) return fail(1, "process", "header too long");
  if (!write_all((const uint8_t *)header, (size_t)n) || !write_all(img->data, img->data_size)) return fail(2, "output", "stdout closed");
  return 0;
}

struct bounds {
  uint64_t max_pixels, pixels_per_byte, base, per_pixel;
};

static int develop(libraw_data_t *raw, const uint8_t *bytes, size_t size, struct bounds b) {
  raw->params.use_camera_wb = 1;
  raw->params.use_camera_matrix = 1;
  raw->params.output_color = 1;
  raw->params.output_bps = 8;
  raw->params.user_qual = 3;
  raw->params.user_flip = -1;
  raw->params.half_size = 0;
  libraw_set_dataerror_handler(raw, on_data_error, NULL);
  int err = libraw_open_buffer(raw, (void *)bytes, size);
  if (err != LIBRAW_SUCCESS) return fail(1, "open", libraw_strerror(err));
  unsigned width = raw->sizes.width, height = raw->sizes.height;
  if (width > 0 && height > 0 && (uint64_t)width * height > b.max_pixels) {
    fprintf(stderr, "pixels %u %u\n", width, height);
    return 3;
  }
  if ((uint64_t)width * height > (uint64_t)size * b.pixels_per_byte) {
    fprintf(stderr, "sparse %u %u\n", width, height);
    return 5;
  }
  bound_data(size, (uint64_t)width * height, b.base, b.per_pixel);
  if ((err = libraw_unpack(raw)) != LIBRAW_SUCCESS) return fail(1, "unpack", libraw_strerror(err));
  if (data_errors) return 4;
  if ((err = libraw_dcraw_process(raw)) != LIBRAW_SUCCESS) return fail(1, "process", libraw_strerror(err));
  if (data_errors) return 4;
  libraw_processed_image_t *img = libraw_dcraw_make_mem_image(raw, &err);
  if (!img) return fail(1, "process", libraw_strerror(err));
  int status = write_pam(raw, img);
  libraw_dcraw_clear_mem(img);
  return status;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--version") == 0) {
    const char *version = libraw_version();
    printf("%.*s\n", (int)strcspn(version, "-"), version);
    return 0;
  }
  first_to_go_when_memory_runs_out();
  if (argc != 5) return fail(2, "usage", "compressd-raw-decode MAX_PIXELS PIXELS_PER_BYTE BASE_BYTES BYTES_PER_PIXEL < file > image.pam");
  struct bounds b = {strtoull(argv[1], NULL, 10), strtoull(argv[2], NULL, 10), strtoull(argv[3], NULL, 10), strtoull(argv[4], NULL, 10)};
  if (b.max_pixels == 0 || b.pixels_per_byte == 0 || b.base == 0 || b.per_pixel == 0)
    return fail(2, "usage", "MAX_PIXELS, PIXELS_PER_BYTE, BASE_BYTES and BYTES_PER_PIXEL are positive integers");
  size_t size = 0;
  uint8_t *bytes = read_stdin(&size);
  if (!bytes) return fail(2, "input", "stdin could not be read");
  libraw_data_t *raw = libraw_init(0);
  if (!raw) return fail(2, "input", "out of memory");
  int status = develop(raw, bytes, size, b);
  libraw_close(raw);
  free(bytes);
  return status;
}
