/*
 * One fetch of a tiered snapshot's cold pages for several copy-mode
 * children (docs/cold-tier.md, "Several children, one fetch").
 *
 * Each copy-mode child of a tiered snapshot needs the same cold pages,
 * which its pager reads from the memory server by RMA. When one fork makes
 * several such children, its restore forks a process of its own (the
 * fetcher) with memory shared with their pagers; once the children run it
 * reads every cold page once, and each pager installs them from there,
 * waits for a chunk on its way, and reads by RMA only what the fetcher
 * could not get. (Started before the children ran, the fetch took the
 * CPU of their restore; for a single child it saved nothing.)
 *
 * The pages are checked (CRC-32C) as they arrive, as every cold page is;
 * a chunk that cannot be read is marked failed, and a fetcher that dies
 * leaves its chunks to the pagers, which tell by its pidfd: a child never
 * waits for a fetch that will not come, nor reads a page that was not
 * checked.
 */
#ifndef CXLCR_PAGER_AHEAD_H
#define CXLCR_PAGER_AHEAD_H

#include <stdbool.h>
#include <stdint.h>

struct cxlcr_snapshot;

/* Cold pages per RMA read of the cold fetch (the pagers' lanes and the
 * fetcher ahead). Measured on this project's emulated pod, 24,976 cold
 * pages: 16 a read 239-240 ms, 64 181-209 ms, 256 166-187 ms; the rest is
 * the installs. */
#define COLD_RUN 64u
/* Reads of a cold page or chunk, each bounded by CXLCR_TIER_TIMEOUT_MS,
 * before it is given up (a pager's fault then kills its child). */
#define COLD_TRIES 3u

/* The cold fetch's chunks: a tiered snapshot's cold runs cut into pieces
 * of at most COLD_RUN pages, in heap order; `at` is a chunk's first page's
 * index among the cold pages (where it lies in the memory server's extent,
 * and in the fetcher's memory). */
struct cold_chunk {
	uint64_t first_page;
	uint64_t at;
	uint32_t pages;
};
struct cold_chunks {
	struct cold_chunk *c;
	uint64_t count;
	uint64_t pages;
};
int cold_chunks_make(const struct cxlcr_snapshot *s, struct cold_chunks *out);
void cold_chunks_free(struct cold_chunks *c);
/* The chunk that holds heap page page: its index, or -1. */
int64_t cold_chunk_of(const struct cold_chunks *c, uint64_t page);

/* How much the fetcher may hold (it is the cold pages twice, for as long
 * as the pagers take to install them): $CXLCR_COLD_AHEAD_MB (cxlcrd's
 * cold_ahead_mb sets it), 0 for no fetch ahead; unset, AHEAD_MB_DEFAULT.
 * Chunks past it are the pagers'. */
#define AHEAD_ENV "CXLCR_COLD_AHEAD_MB"
#define AHEAD_MB_DEFAULT 1024u
#define AHEAD_MB_MAX (1u << 24) /* 16 TiB */

/* Tests only, in the daemons' environment: every fetcher stops itself
 * (SIGSTOP) once its first chunk is in. */
#define AHEAD_TEST_STOP_ENV "CXLCR_TEST_AHEAD_STOP"

struct cold_ahead {
	struct cold_chunks chunks;
	uint64_t covered;            /* chunks [0, covered) are the fetcher's */
	uint32_t *state;             /* shared: enum ahead_state, one per chunk */
	uint32_t *go;                /* shared: set once the children run (ahead_go()) */
	uint8_t *data;               /* shared: the pages, at chunk.at */
	void *map;
	size_t map_len;
	int pidfd;                   /* -1: none started */
};

/* A number of MiB (the configuration's cold_ahead_mb) as bytes, or -1
 * with one line; ahead_limit() the same of $CXLCR_COLD_AHEAD_MB, or the
 * default if it is unset. */
int64_t ahead_limit_parse(const char *text);
int64_t ahead_limit(void);

/* Forks the fetcher of snapshot s's cold pages (s open and checked: its
 * cold part's reader is what the fetcher uses), limit bytes at most,
 * before the pagers are forked (they inherit its memory and pidfd); it
 * reads nothing before ahead_go(). 0, or -1 with one line (nothing
 * started: the pagers fetch it all). */
int ahead_start(const struct cxlcr_snapshot *s, uint64_t limit, struct cold_ahead *a);

/* Chunk i of the fetch: 1 with *data at its pages once the fetcher has
 * them, checked; 0 if it is still on its way after wait_ms; -1 if it will
 * not come (failed, not the fetcher's, or the fetcher is gone): the caller
 * reads it itself. */
int ahead_chunk(const struct cold_ahead *a, uint64_t i, int wait_ms, const uint8_t **data);

/* Heap page page's cold copy if the fetcher has it, checked: NULL if not
 * (yet). Does not wait. */
const uint8_t *ahead_page(const struct cold_ahead *a, uint64_t page);

/* Whether a is a fetch (started, and not released). */
bool ahead_on(const struct cold_ahead *a);

/* Lets the fetcher start: it waits until the children run. */
void ahead_go(struct cold_ahead *a);

/* Kills the fetcher (the request failed: its children are gone). */
void ahead_stop(struct cold_ahead *a);

/* This process's part of it goes (the memory, once every process that
 * mapped it has released it or ended, and the pidfd); the fetcher goes
 * on. Also for a that was never started. */
void ahead_release(struct cold_ahead *a);

#endif
