/*
 * The service's part of write tracking (tracking/track.h).
 *
 * A userfaultfd registers memory of the process that made it, so the
 * service makes it, on the daemon's request: the helper thread creates one
 * in asynchronous write-protect mode and publishes its number in the arena
 * header; the tracker (a root process on this host) copies it out with
 * pidfd_getfd() and asks again, and the thread closes its own copy. The
 * tracker then holds the only one, and registers the heap: the service
 * keeps no userfaultfd of its own, which CRIU could not dump.
 */
#include <unistd.h>

#include "../tracking/track.h"
#include "preload.h"

void preload_track_serve(struct cxlcr_arena_header *h)
{
	/* A tracker starts after every start and restore: a restored
	 * process's mark page has lost its MADV_WIPEONFORK (attach.c). */
	preload_arm_live_mark();
	int fd = __atomic_load_n(&h->track_fd, __ATOMIC_ACQUIRE);
	if (fd >= 0) {
		close(fd);
		fd = -1;
	} else {
		fd = cxlcr_track_make_uffd(); /* -1 on failure: the tracker sees none */
	}
	__atomic_store_n(&h->track_fd, fd, __ATOMIC_RELEASE);
}
