/*
 * What the native decoders' programs share (heif/decode.c, raw/decode.c): the one-line failure on
 * stderr with its exit status, the whole of stdin, and writes to stdout that survive short writes.
 */
#ifndef COMPRESSD_NATIVE_IO_H
#define COMPRESSD_NATIVE_IO_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int fail(int status, const char *what, const char *message) {
  fprintf(stderr, "%s: %s\n", what, message);
  return status;
}

static int write_all(const uint8_t *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(STDOUT_FILENO, p, n);
    if (w <= 0) return 0;
    p += w;
    n -= (size_t)w;
  }
  return 1;
}

/* The whole of stdin, grown by doubling; NULL when it cannot be read or held. */
static uint8_t *read_stdin(size_t *size) {
  size_t cap = 1 << 20, len = 0;
  uint8_t *buf = malloc(cap);
  for (;;) {
    if (!buf) return NULL;
    ssize_t r = read(STDIN_FILENO, buf + len, cap - len);
    if (r < 0) {
      free(buf);
      return NULL;
    }
    if (r == 0) break;
    len += (size_t)r;
    if (len == cap) {
      uint8_t *grown = realloc(buf, cap *= 2);
      if (!grown) free(buf);
      buf = grown;
    }
  }
  *size = len;
  return buf;
}

#endif
