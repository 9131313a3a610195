/*
 * The native decoders' programs' memory (heif/decode.c, raw/decode.c), bounded by the picture their
 * file declares: a hostile file that declares a small picture cannot make the decoder take more than
 * a picture of that size may. One allocation past the bound, or a thread whose stack does not fit,
 * ends the program at once, with status 6 and "memory BOUND" on stderr: libde265 goes on with a null
 * pointer where an allocation fails, libheif waited for ever on a thread that had failed one (seen
 * under a 62 MB bound), and a thread that cannot start aborts libheif and libgomp. Every allocation
 * and thread of the program and of its libraries passes through the functions below (the program is
 * linked with -rdynamic, so they come before the C library's, or the preloaded jemalloc's, which
 * they call).
 */
#ifndef COMPRESSD_NATIVE_MEMORY_H
#define COMPRESSD_NATIVE_MEMORY_H
/* RTLD_NEXT: this header comes before any other, so that the C library's headers see it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/*
 * The message a failed allocation writes, made when the bound is set (nothing is formatted then).
 * Before it is set a failure is the machine's, not the file's: "memory unbounded" (no bound to name).
 */
static char out_of_memory_said[64] = "memory unbounded\n";

static void out_of_memory(void) {
  (void)!write(STDERR_FILENO, out_of_memory_said, strlen(out_of_memory_said));
  _exit(6);
}

/*
 * Bounds the program's data (its heap, anonymous mappings and threads' stacks: RLIMIT_DATA) once the
 * header's size is known and before anything is decoded: `base` bytes and `per_pixel` bytes a pixel,
 * besides the `input` already read.
 */
static void bound_data(size_t input, uint64_t pixels, uint64_t base, uint64_t per_pixel) {
  uint64_t bound = input + base + pixels * per_pixel;
  snprintf(out_of_memory_said, sizeof out_of_memory_said, "memory %llu\n", (unsigned long long)bound);
  struct rlimit r = {(rlim_t)bound, (rlim_t)bound};
  setrlimit(RLIMIT_DATA, &r);
}

/*
 * The first process the kernel ends when memory runs out: this one, failing one job, rather than the
 * server with every job it holds. Raising one's own score needs no privilege; without /proc the
 * program runs as it would have.
 */
static void first_to_go_when_memory_runs_out(void) {
  FILE *f = fopen("/proc/self/oom_score_adj", "w");
  if (!f) return;
  fputs("1000", f);
  fclose(f);
}

/* The allocator underneath, found on first use; dlsym's own allocations meanwhile come from `early`. */
static struct {
  void *(*malloc)(size_t);
  void *(*calloc)(size_t, size_t);
  void *(*realloc)(void *, size_t);
  void (*free)(void *);
  int (*posix_memalign)(void **, size_t, size_t);
  void *(*aligned_alloc)(size_t, size_t);
  void *(*memalign)(size_t, size_t);
  int (*pthread_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
} next;
static _Alignas(16) unsigned char early[16384];
static size_t early_used = 0;
static int resolving = 0;

static int is_early(const void *p) {
  return (const unsigned char *)p >= early && (const unsigned char *)p < early + sizeof early;
}

static void *early_alloc(size_t n) {
  size_t at = (early_used + 15) & ~(size_t)15;
  if (at + n > sizeof early) out_of_memory();
  early_used = at + n;
  return early + at;
}

static void resolve(void) {
  if (next.free) return;
  resolving = 1;
  next.malloc = dlsym(RTLD_NEXT, "malloc");
  next.calloc = dlsym(RTLD_NEXT, "calloc");
  next.realloc = dlsym(RTLD_NEXT, "realloc");
  next.posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
  next.aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
  next.memalign = dlsym(RTLD_NEXT, "memalign");
  next.pthread_create = dlsym(RTLD_NEXT, "pthread_create");
  next.free = dlsym(RTLD_NEXT, "free");
  resolving = 0;
}

static void *checked(void *p, size_t n) {
  if (!p && n && errno == ENOMEM) out_of_memory();
  return p;
}

void *malloc(size_t n) {
  if (resolving) return early_alloc(n);
  resolve();
  return checked(next.malloc(n), n);
}

void *calloc(size_t count, size_t size) {
  if (resolving) return early_alloc(count * size);
  resolve();
  return checked(next.calloc(count, size), count * size);
}

void *realloc(void *p, size_t n) {
  resolve();
  if (is_early(p)) {
    void *moved = checked(next.malloc(n), n);
    memcpy(moved, p, n < sizeof early - (size_t)((unsigned char *)p - early) ? n : sizeof early - (size_t)((unsigned char *)p - early));
    return moved;
  }
  return checked(next.realloc(p, n), n);
}

void free(void *p) {
  if (!p || is_early(p)) return;
  resolve();
  next.free(p);
}

int posix_memalign(void **p, size_t alignment, size_t n) {
  resolve();
  int r = next.posix_memalign(p, alignment, n);
  if (r == ENOMEM && n) out_of_memory();
  return r;
}

void *aligned_alloc(size_t alignment, size_t n) {
  resolve();
  return checked(next.aligned_alloc(alignment, n), n);
}

void *memalign(size_t alignment, size_t n) {
  resolve();
  return checked(next.memalign(alignment, n), n);
}

/*
 * C++'s operator new, each form (plain and array, nothrow, aligned): the preloaded jemalloc brings
 * its own, which would not pass through malloc above, and libheif's nothrow planes then reported a
 * failed allocation as "Unsupported color conversion". The mangled names are the Itanium C++ ABI's,
 * x64's and arm64's alike. What they return is freed by either library's operator delete.
 */
static void *new_of(size_t n) {
  return malloc(n ? n : 1);
}
static void *aligned_new_of(size_t n, size_t alignment) {
  void *p = NULL;
  if (posix_memalign(&p, alignment < sizeof(void *) ? sizeof(void *) : alignment, n ? n : 1) != 0) out_of_memory();
  return p;
}
void *_Znwm(size_t n) { return new_of(n); }
void *_Znam(size_t n) { return new_of(n); }
void *_ZnwmRKSt9nothrow_t(size_t n, const void *nothrow) { (void)nothrow; return new_of(n); }
void *_ZnamRKSt9nothrow_t(size_t n, const void *nothrow) { (void)nothrow; return new_of(n); }
void *_ZnwmSt11align_val_t(size_t n, size_t alignment) { return aligned_new_of(n, alignment); }
void *_ZnamSt11align_val_t(size_t n, size_t alignment) { return aligned_new_of(n, alignment); }
void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t alignment, const void *nothrow) { (void)nothrow; return aligned_new_of(n, alignment); }
void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t alignment, const void *nothrow) { (void)nothrow; return aligned_new_of(n, alignment); }

int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *), void *arg) {
  resolve();
  int r = next.pthread_create(thread, attr, start, arg);
  if (r == EAGAIN) out_of_memory();
  return r;
}

#endif
