/*
 * What CRIU says of a dump it made: DIR/stats-dump, one of its own images.
 */
#ifndef CXLCR_CRIU_STATS_H
#define CXLCR_CRIU_STATS_H

#include <stdint.h>

/* In milliseconds: freezing the tasks, the tasks frozen within the dump,
 * and of that the memory dump and its writing. */
struct criu_dump_stats {
	double freezing_ms, frozen_ms, memdump_ms, memwrite_ms;
	uint64_t pages_written;
};

/* 0, or -1 (zeros in *out) when DIR holds no readable stats-dump. */
int criu_read_dump_stats(const char *dir, struct criu_dump_stats *out);

#endif
