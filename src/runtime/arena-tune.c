/*
 * libcompressd-arena.so: loaded by LD_PRELOAD after jemalloc (src/runtime/allocator.ts), it makes
 * jemalloc's arena 0 keep freed extents as its options say, and backs large buffers with huge pages.
 *
 * jemalloc 5.3 sets up arena 0 before it reads `oversize_threshold`, so that arena keeps the default
 * of 8 MiB whatever the option, and purges every freed extent of 8 MiB or more at once (unless a
 * decay is -1). compressd runs every thread on that one arena (`narenas:1`, so that a buffer freed
 * by one thread is reused by the next job's, whichever thread runs it) without the oversize arena
 * (`oversize_threshold:0`), so a job's pictures were fresh pages each time, a page fault every 4 KiB.
 * With arena 0 told the option's value, freed pages are purged by the background thread's decay
 * (10 s) like any others.
 *
 * A buffer that is still fresh pages (a job larger than the last, or after the decay) costs a fault
 * every 4 KiB, 10-15 us each in a VM whose host backs its memory lazily: 0.4 s for a 100 MB buffer.
 * jemalloc's `thp:always` gives every mapping huge pages, which also rounds small allocations up to
 * 2 MiB and costs memory at rest (docs/operating.md, "Huge pages"). Here only an allocation of
 * HUGE_FROM bytes or more is advised to take them while it lives (a fault every 2 MiB: the same
 * 100 MB written in 11-300 ms, by how much of it the host already backs), and advised back when it is
 * freed, so that the small allocations jemalloc later carves from its pages fault 4 KiB at a time as
 * before. jemalloc's experimental hooks tell us of each allocation; an operator's `thp:always` or
 * `thp:never` leaves them uninstalled. The same goes for large growths of WebAssembly memory (see
 * mprotect below). Without jemalloc in the process this does nothing.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef int (*mallctl_fn)(const char *name, void *old, size_t *oldlen, void *new, size_t newlen);
typedef size_t (*usable_size_fn)(void *ptr);

/* jemalloc 5.3's hooks_t (include/jemalloc/internal/hook.h); a hook's `type` says which call it follows. */
typedef void (*hook_alloc)(void *extra, int type, void *result, uintptr_t result_raw, uintptr_t args_raw[3]);
typedef void (*hook_dalloc)(void *extra, int type, void *address, uintptr_t args_raw[3]);
typedef void (*hook_expand)(void *extra, int type, void *address, size_t old_usize, size_t new_usize, uintptr_t result_raw,
                            uintptr_t args_raw[4]);
typedef struct {
  hook_alloc alloc_hook;
  hook_dalloc dalloc_hook;
  hook_expand expand_hook;
  void *extra;
} hooks_t;

/* A decoded picture or a document's samples; libvips's tiles and the server's own buffers stay below. */
#define HUGE_FROM ((size_t)4 << 20)
#define HUGE_PAGE ((uintptr_t)2 << 20)

static usable_size_fn usable_size;

/* Only the huge pages wholly inside [start, start + size): the allocation's neighbours keep their advice. */
static void advise(uintptr_t start, size_t size, int advice) {
  uintptr_t from = (start + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
  uintptr_t to = (start + size) & ~(HUGE_PAGE - 1);
  if (to > from) madvise((void *)from, to - from, advice);
}

static void on_alloc(void *extra, int type, void *result, uintptr_t result_raw, uintptr_t args_raw[3]) {
  (void)extra, (void)type, (void)result_raw, (void)args_raw;
  if (!result) return;
  size_t size = usable_size(result);
  if (size >= HUGE_FROM) advise((uintptr_t)result, size, MADV_HUGEPAGE);
}

/* Called before jemalloc frees anything: `address` is still allocated, its size can be asked. */
static void on_dalloc(void *extra, int type, void *address, uintptr_t args_raw[3]) {
  (void)extra, (void)type, (void)args_raw;
  if (!address) return;
  size_t size = usable_size(address);
  if (size >= HUGE_FROM) advise((uintptr_t)address, size, MADV_NOHUGEPAGE);
}

/* A reallocation in place: grown, the whole takes huge pages; shrunk, the part given up is advised back. */
static void on_expand(void *extra, int type, void *address, size_t old_size, size_t new_size, uintptr_t result_raw,
                      uintptr_t args_raw[4]) {
  (void)extra, (void)type, (void)result_raw, (void)args_raw;
  if (new_size >= old_size) {
    if (new_size >= HUGE_FROM) advise((uintptr_t)address, new_size, MADV_HUGEPAGE);
  } else if (old_size >= HUGE_FROM) {
    advise((uintptr_t)address + new_size, old_size - new_size, MADV_NOHUGEPAGE);
  }
}

typedef int (*mprotect_fn)(void *addr, size_t len, int prot);
static mprotect_fn next_mprotect;
static int large_growths_take_huge_pages;

/*
 * WebAssembly memories (the perceptual metric's arenas, the pixel kernels, the codecs built to
 * WebAssembly) are not malloc's: V8 reserves each one's address space and makes every growth readable
 * and writable with mprotect, so a growth's pages are as fresh as a new buffer's (a worker thread's first
 * scores faulted in about 115 MB). A growth of HUGE_FROM or more takes huge pages like a large buffer;
 * they go back with the memory, which is unmapped whole. Smaller changes (V8's own heap pages, code)
 * are passed on untouched.
 */
int mprotect(void *addr, size_t len, int prot) {
  if (!next_mprotect) next_mprotect = (mprotect_fn)dlsym(RTLD_NEXT, "mprotect");
  if (!next_mprotect) return (int)syscall(SYS_mprotect, addr, len, prot);
  int done = next_mprotect(addr, len, prot);
  if (done == 0 && large_growths_take_huge_pages && len >= HUGE_FROM && prot == (PROT_READ | PROT_WRITE))
    advise((uintptr_t)addr, len, MADV_HUGEPAGE);
  return done;
}

static void large_buffers_take_huge_pages(mallctl_fn mallctl) {
  const char *thp = NULL;
  size_t len = sizeof thp;
  if (mallctl("opt.thp", &thp, &len, NULL, 0) != 0 || !thp || strcmp(thp, "default") != 0) return;
  usable_size = (usable_size_fn)dlsym(RTLD_DEFAULT, "malloc_usable_size");
  if (!usable_size) return;
  static hooks_t hooks = {on_alloc, on_dalloc, on_expand, NULL};
  void *handle = NULL;
  len = sizeof handle;
  if (mallctl("experimental.hooks.install", &handle, &len, &hooks, sizeof hooks) == 0) large_growths_take_huge_pages = 1;
}

__attribute__((constructor)) static void arena0_follows_options(void) {
  mallctl_fn mallctl = (mallctl_fn)dlsym(RTLD_DEFAULT, "mallctl");
  if (!mallctl) return;
  size_t threshold = 0;
  size_t len = sizeof threshold;
  if (mallctl("opt.oversize_threshold", &threshold, &len, NULL, 0) != 0) return;
  /* 0 is "no oversize arena": nothing is large enough to be purged at once. */
  if (threshold == 0) threshold = SIZE_MAX;
  mallctl("arena.0.oversize_threshold", NULL, NULL, &threshold, sizeof threshold);
  large_buffers_take_huge_pages(mallctl);
}
