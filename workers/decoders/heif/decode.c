/*
 * compressd-heif-decode: decodes the primary image of a HEIF file read from stdin with Debian's
 * libheif (HEVC through libde265, AV1 through dav1d), and writes its pixels to stdout as a PAM (P7)
 * image, 8 bits per sample, RGB or RGB_ALPHA. workers/decoders/heic-native.ts runs it; a separate
 * process, so that a fault in a video decoder on a hostile file ends this program, not the server.
 *
 *   compressd-heif-decode MAX_PIXELS THREADS BASE_BYTES BYTES_PER_PIXEL
 *       decode; THREADS bounds libheif's grid-tile threads, BASE_BYTES + BYTES_PER_PIXEL × the declared
 *       pixels (beside the file) its memory (native-memory.h)
 *   compressd-heif-decode --version              print libheif's version (proves the libraries load)
 *
 * Exit status and the one line on stderr:
 *   0  the PAM image is on stdout
 *   1  "read: <libheif's message>" or "decode: <libheif's message>"
 *   2  "usage" or "input: <reason>"
 *   3  "pixels WIDTH HEIGHT": the header declares more than MAX_PIXELS; nothing was decoded
 *   6  "memory BOUND": an allocation or a thread past the memory's bound (native-memory.h)
 *
 * Decoding is as libheif's defaults do it (libheif-js too): the file's rotation, mirror and crop
 * applied, 4:2:0 chroma repeated (nearest neighbour), samples of more than 8 bits scaled to 8. Unlike
 * libheif-js's WebAssembly build, libde265 here applies HEVC's in-loop filters (deblocking and SAO),
 * as the standard requires: the WebAssembly pixels equal these with both filters switched off.
 */
#include "../native-memory.h"
#include <libheif/heif.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "../native-io.h"

static int write_pam(const uint8_t *plane, int stride, int width, int height, int alpha) {
  if (!plane || width <= 0 || height <= 0) return fail(1, "decode", "libheif returned no pixels");
  int channels = alpha ? 4 : 3;
  char header[128];
  int n = snprintf(header, sizeof header, "P7\nWIDTH %d\nHEIGHT %d\nDEPTH %d\nMAXVAL 255\nTUPLTYPE %s\nENDHDR\n", width, height, channels,
                   alpha ? "RGB_ALPHA" : "RGB");
  if (!write_all((const uint8_t *)header, (size_t)n)) return fail(2, "output", "stdout closed");
  size_t row = (size_t)width * (size_t)channels;
  for (int y = 0; y < height; y++) {
    if (!write_all(plane + (size_t)y * (size_t)stride, row)) return fail(2, "output", "stdout closed");
  }
  return 0;
}

/* The primary image as interleaved 8-bit RGB(A), on stdout. */
static int decode_rgb(const struct heif_image_handle *handle, int alpha) {
  struct heif_image *img = NULL;
  struct heif_error err = heif_decode_image(handle, &img, heif_colorspace_RGB, alpha ? heif_chroma_interleaved_RGBA : heif_chroma_interleaved_RGB, NULL);
  if (err.code != heif_error_Ok) return fail(1, "decode", err.message);
  int stride = 0;
  const uint8_t *plane = heif_image_get_plane_readonly(img, heif_channel_interleaved, &stride);
  int status = write_pam(plane, stride, heif_image_get_width(img, heif_channel_interleaved), heif_image_get_height(img, heif_channel_interleaved), alpha);
  heif_image_release(img);
  return status;
}

static int decode(const uint8_t *bytes, size_t size, uint64_t max_pixels, int threads, uint64_t base, uint64_t per_pixel) {
  struct heif_context *ctx = heif_context_alloc();
  if (!ctx) return fail(2, "input", "out of memory");
  heif_context_set_max_decoding_threads(ctx, threads);
  struct heif_image_handle *handle = NULL;
  int status;
  struct heif_error err = heif_context_read_from_memory_without_copy(ctx, bytes, size, NULL);
  if (err.code == heif_error_Ok) err = heif_context_get_primary_image_handle(ctx, &handle);
  if (err.code != heif_error_Ok) {
    status = fail(1, "read", err.message);
  } else {
    int width = heif_image_handle_get_width(handle);
    int height = heif_image_handle_get_height(handle);
    int alpha = heif_image_handle_has_alpha_channel(handle);
    if (width > 0 && height > 0 && (uint64_t)width * (uint64_t)height > max_pixels) {
      fprintf(stderr, "pixels %d %d\n", width, height);
      status = 3;
    } else {
      bound_data(size, (uint64_t)width * (uint64_t)height, base, per_pixel);
      status = decode_rgb(handle, alpha);
    }
  }
  if (handle) heif_image_handle_release(handle);
  heif_context_free(ctx);
  return status;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--version") == 0) {
    printf("%s\n", heif_get_version());
    return 0;
  }
  first_to_go_when_memory_runs_out();
  if (argc != 5) return fail(2, "usage", "compressd-heif-decode MAX_PIXELS THREADS BASE_BYTES BYTES_PER_PIXEL < file.heic > image.pam");
  uint64_t max_pixels = strtoull(argv[1], NULL, 10);
  int threads = atoi(argv[2]);
  uint64_t base = strtoull(argv[3], NULL, 10), per_pixel = strtoull(argv[4], NULL, 10);
  if (max_pixels == 0 || threads < 1 || base == 0 || per_pixel == 0) return fail(2, "usage", "MAX_PIXELS, THREADS, BASE_BYTES and BYTES_PER_PIXEL are positive integers");
  size_t size = 0;
  uint8_t *bytes = read_stdin(&size);
  if (!bytes) return fail(2, "input", "stdin could not be read");
  heif_init(NULL);
  int status = decode(bytes, size, max_pixels, threads, base, per_pixel);
  heif_deinit();
  free(bytes);
  return status;
}
