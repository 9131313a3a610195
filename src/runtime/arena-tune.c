/*
 * libcompressd-arena.so: loaded by LD_PRELOAD after jemalloc (src/runtime/allocator.ts), it makes
 * jemalloc's arena 0 keep freed extents as its options say.
 *
 * jemalloc 5.3 sets up arena 0 before it reads `oversize_threshold`, so that arena keeps the default
 * of 8 MiB whatever the option, and purges every freed extent of 8 MiB or more at once (unless a
 * decay is -1). compressd runs every thread on that one arena (`narenas:1`, so that a buffer freed
 * by one thread is reused by the next job's, whichever thread runs it) without the oversize arena
 * (`oversize_threshold:0`), so a job's pictures were fresh pages each time, a page fault every 4 KiB.
 * With arena 0 told the option's value, freed pages are purged by the background thread's decay
 * (10 s) like any others. Without jemalloc in the process this does nothing.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>

typedef int (*mallctl_fn)(const char *name, void *old, size_t *oldlen, void *new, size_t newlen);

__attribute__((constructor)) static void arena0_follows_options(void) {
  mallctl_fn mallctl = (mallctl_fn)dlsym(RTLD_DEFAULT, "mallctl");
  if (!mallctl) return;
  size_t threshold = 0;
  size_t len = sizeof threshold;
  if (mallctl("opt.oversize_threshold", &threshold, &len, NULL, 0) != 0) return;
  /* 0 is "no oversize arena": nothing is large enough to be purged at once. */
  if (threshold == 0) threshold = SIZE_MAX;
  mallctl("arena.0.oversize_threshold", NULL, NULL, &threshold, sizeof threshold);
}
