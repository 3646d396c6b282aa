/*
 * How the preload reaches its two allocators.
 *
 * Debian's libmimalloc.so is built to replace malloc: it exports malloc,
 * free, ... and even __libc_malloc. Linked normally it would sit in the
 * process's global symbol scope, and malloc would then resolve to
 * mimalloc's default (private, anonymous-memory) heap. So the preload loads
 * it with dlopen(RTLD_LOCAL) and calls it through function pointers: its
 * symbols stay private. (glibc's own functions: glibc.c.)
 *
 * Loading it from our constructor also orders the per-thread clean-up:
 * our thread-exit key is created before mimalloc's, so at thread exit we
 * stop using a thread's arena heap before mimalloc deletes that heap.
 */
#include <dlfcn.h>
#include <stdio.h>

#include "../common/error.h"
#include "preload.h"

#define MIMALLOC_SONAME "libmimalloc.so.2"

static void *must_sym(void *lib, const char *name, int *missing)
{
	void *f = dlsym(lib, name);
	if (!f)
		(*missing)++;
	return f;
}

int preload_load_mimalloc(void)
{
	void *lib = dlopen(MIMALLOC_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		return cxlcr_error("cannot load %s: %s", MIMALLOC_SONAME, dlerror());
	int missing = 0;
	struct mimalloc_api *mi = &cx.mi;
	mi->heap_malloc = must_sym(lib, "mi_heap_malloc", &missing);
	mi->heap_calloc = must_sym(lib, "mi_heap_calloc", &missing);
	mi->heap_realloc = must_sym(lib, "mi_heap_realloc", &missing);
	mi->heap_malloc_aligned_at = must_sym(lib, "mi_heap_malloc_aligned_at", &missing);
	mi->free = must_sym(lib, "mi_free", &missing);
	mi->usable_size = must_sym(lib, "mi_usable_size", &missing);
	mi->heap_new = must_sym(lib, "mi_heap_new", &missing);
	mi->manage_os_memory_ex = must_sym(lib, "mi_manage_os_memory_ex", &missing);
	mi->option_set = must_sym(lib, "mi_option_set", &missing);
	if (missing)
		return cxlcr_error("%s lacks the arena API (mimalloc >= 2.0.9 needed)", MIMALLOC_SONAME);
	/* Segments come only from the arenas we give it (the arena and its
	 * extents, shared by every thread's heap), never from the system: a
	 * full arena makes an allocation fail, and the preload grows it. */
	mi->option_set(mi_option_limit_os_alloc, 1);
	return 0;
}
