/*
 * fork() under the preload. The arena is mapped MAP_SHARED, so a child of
 * fork() shares the parent's live heap: it must allocate from glibc, its
 * frees of arena blocks must be no-ops, and a realloc of an arena block
 * must copy it out. The child sees the parent's later writes (live
 * contents, not a fork-time copy): that is the documented semantic.
 * (A child that writes into arena memory writes the parent's heap: a known
 * limitation, not tested here.)
 * Runs under libcxlcr-preload.so (see tests/run.sh).
 */
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

#define NBLOCKS 64

static struct arena A;
static unsigned char *blocks[NBLOCKS];
static size_t sizes[NBLOCKS];

static unsigned char pattern(int i, size_t k)
{
	return (unsigned char)(i * 31 + k % 251 + 1);
}

static void fill(int i)
{
	for (size_t k = 0; k < sizes[i]; k++)
		blocks[i][k] = pattern(i, k);
}

static void verify(int i, const unsigned char *p, size_t n, const char *what)
{
	for (size_t k = 0; k < n; k++)
		CHECK(p[k] == pattern(i, k), "%s: block %d differs at byte %zu", what, i, k);
}

static void *thread_malloc(void *unused)
{
	(void)unused;
	return malloc(1000);
}

/* The child of the first fork: touches the parent's blocks only through
 * free and realloc, which must leave them alone. Returns its exit status. */
static int child_ops(int64_t used_at_fork, bool with_thread)
{
	/* stdout's buffer is an arena block of the parent: writing into it
	 * would write the parent's heap (the known limitation), so the child
	 * writes unbuffered. */
	setvbuf(stdout, NULL, _IONBF, 0);
	SAY("child: malloc, calloc, posix_memalign, strdup come from glibc, not the arena");
	void *p = malloc(100);
	CHECK(p && !in_arena_heap(&A, p), "child malloc gave arena memory %p", p);
	void *q = calloc(10, 100);
	CHECK(q && !in_arena_heap(&A, q), "child calloc gave arena memory %p", q);
	void *al = NULL;
	CHECK(posix_memalign(&al, 256, 1000) == 0 && !in_arena_heap(&A, al) && (uintptr_t)al % 256 == 0,
	      "child posix_memalign gave %p", al);
	char *s = strdup("child");
	CHECK(s && !in_arena_heap(&A, s));
	void *big = malloc(8 * MiB);
	CHECK(big && !in_arena_heap(&A, big));
	memset(big, 1, 8 * MiB);
	free(p);
	free(q);
	free(al);
	free(s);
	free(big);

	if (with_thread) {
		SAY("child: a new thread allocates from glibc too");
		pthread_t t;
		void *tp = NULL;
		CHECK(pthread_create(&t, NULL, thread_malloc, NULL) == 0);
		CHECK(pthread_join(t, &tp) == 0);
		CHECK(tp && !in_arena_heap(&A, tp), "child's thread got arena memory %p", tp);
		free(tp);
	}

	SAY("child: realloc of an arena block copies it out of the arena, the original stays");
	for (int i = 0; i < NBLOCKS; i += 4) {
		unsigned char *orig = launder(blocks[i]);
		unsigned char *r = realloc(blocks[i], sizes[i] * 2 + 100);
		CHECK(r && !in_arena_heap(&A, r), "child realloc of block %d gave %p", i, (void *)r);
		verify(i, r, sizes[i], "copied by the child's realloc");
		verify(i, orig, sizes[i], "the original after the child's realloc");
		free(r);
	}
	unsigned char *shrunk = realloc(blocks[17], 10);
	CHECK(shrunk && !in_arena_heap(&A, shrunk));
	verify(17, shrunk, 10, "shrunk by the child's realloc");
	free(shrunk);

	SAY("child: free of the parent's arena blocks is a no-op");
	for (int i = 0; i < NBLOCKS; i += 2)
		free(blocks[i]);
	/* Were the frees real, mimalloc would hand the blocks out again, and
	 * its free lists live inside them: they would now differ. */
	for (int i = 0; i < NBLOCKS; i++)
		verify(i, blocks[i], sizes[i], "after the child's free");
	CHECK(malloc_usable_size(blocks[0]) >= sizes[0]);

	SAY("child: the arena header's bytes used did not change");
	CHECK(arena_used(&A) == used_at_fork, "bytes used %lld at fork, %lld in the child",
	      (long long)used_at_fork, (long long)arena_used(&A));
	return 0;
}

/* The child of the second fork: sees the value the parent writes after the
 * fork. */
static int child_live(volatile uint64_t *cell, int ready_fd, int go_fd)
{
	CHECK(*cell == 1, "child sees %llu at fork, not 1", (unsigned long long)*cell);
	char c = 'r';
	CHECK(write(ready_fd, &c, 1) == 1);
	CHECK(read(go_fd, &c, 1) == 1);
	CHECK(*cell == 2, "child sees %llu after the parent wrote 2 (a fork-time copy?)",
	      (unsigned long long)*cell);
	return 0;
}

static void wait_child(pid_t pid, const char *what)
{
	int status;
	CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
	CHECK(WIFEXITED(status), "%s: child killed by signal %d", what,
	      WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	CHECK(WEXITSTATUS(status) == 0, "%s: child exited with %d", what, WEXITSTATUS(status));
}

int main(void)
{
	printf("alloc_fork: fork children and the parent's arena\n");
	arena_require(&A);
	arena_print(&A);

	SAY("parent: %d blocks of 1 B .. 2 MiB in the arena, filled", NBLOCKS);
	for (int i = 0; i < NBLOCKS; i++) {
		sizes[i] = i == NBLOCKS - 1 ? 2 * MiB : (size_t)1 << (i % 18);
		blocks[i] = malloc(sizes[i]);
		CHECK(blocks[i] && in_arena_heap(&A, blocks[i]), "block %d at %p", i, (void *)blocks[i]);
		fill(i);
	}
	int64_t used = arena_used(&A);
	uint64_t early = A.header->early_allocs;
	uint64_t fallbacks = A.header->fallback_allocs;

	fflush(stdout);
	pid_t pid = fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0)
		_exit(child_ops(used, true));
	wait_child(pid, "malloc family in the child");

	/* Children that run no pthread_atfork handler: _Fork() and a raw
	 * clone(). They share the parent's live heap all the same. */
	SAY("a child of _Fork(), which runs no fork handler: the same");
	uint64_t forks = A.header->fork_count;
	fflush(stdout);
	pid = _Fork();
	CHECK(pid >= 0, "_Fork: %s", strerror(errno));
	if (pid == 0)
		_exit(child_ops(used, true));
	wait_child(pid, "malloc family in a child of _Fork()");
	SAY("a child of a raw clone(SIGCHLD): the same");
	fflush(stdout);
	pid = (pid_t)syscall(SYS_clone, SIGCHLD, 0, NULL, NULL, 0);
	CHECK(pid >= 0, "clone: %s", strerror(errno));
	if (pid == 0)
		_exit(child_ops(used, false));
	wait_child(pid, "malloc family in a child of clone()");
	CHECK(A.header->fork_count >= forks + 2, "fork_count %llu -> %llu: the handler-less children were not counted",
	      (unsigned long long)forks, (unsigned long long)A.header->fork_count);

	SAY("parent: every block intact, bytes used and counters unchanged by the child");
	for (int i = 0; i < NBLOCKS; i++)
		verify(i, blocks[i], sizes[i], "parent, after the child");
	CHECK(arena_used(&A) == used, "bytes used %lld before the fork, %lld after the child",
	      (long long)used, (long long)arena_used(&A));
	CHECK(A.header->early_allocs == early, "the child counted early allocations in the parent's arena");
	CHECK(A.header->fallback_allocs == fallbacks, "the child counted fallbacks in the parent's arena");

	SAY("parent: still allocates in the arena after the fork, and frees its blocks");
	void *p = malloc(1000);
	CHECK(p && in_arena_heap(&A, p), "parent malloc after fork gave %p", p);
	char *s = strdup("parent");
	CHECK(s && in_arena_heap(&A, s));
	free(s);
	free(p);
	for (int i = 0; i < NBLOCKS; i++)
		free(blocks[i]);
	/* mimalloc reuses a freed block at once: the child's no-op frees must
	 * not have put the parent's blocks on a free list twice. */
	void *again[NBLOCKS];
	for (int i = 0; i < NBLOCKS; i++) {
		again[i] = malloc(sizes[i]);
		CHECK(again[i] && in_arena_heap(&A, again[i]));
		for (int j = 0; j < i; j++)
			CHECK(again[j] != again[i], "malloc returned block %p twice", again[i]);
	}
	for (int i = 0; i < NBLOCKS; i++)
		free(again[i]);

	SAY("the child sees the parent's writes after the fork (live contents, not a copy)");
	volatile uint64_t *cell = malloc(sizeof(*cell));
	CHECK(cell && in_arena_heap(&A, (void *)cell));
	*cell = 1;
	int ready[2], go[2];
	CHECK(pipe(ready) == 0 && pipe(go) == 0);
	fflush(stdout);
	pid = fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		close(ready[0]);
		close(go[1]);
		_exit(child_live(cell, ready[1], go[0]));
	}
	close(ready[1]);
	close(go[0]);
	char c;
	CHECK(read(ready[0], &c, 1) == 1, "the child did not get ready");
	*cell = 2;
	CHECK(write(go[1], &c, 1) == 1);
	wait_child(pid, "live contents");
	close(ready[0]);
	close(go[1]);
	free((void *)cell);

	printf("alloc_fork: all checks passed\n");
	return 0;
}
