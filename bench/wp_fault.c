/*
 * What the first write to a page costs once write tracking has re-armed
 * it (issue 16: points every second under a write load), against a write
 * to a page that is already writable, on this machine.
 *
 *   wp_fault [MIB [ROUNDS]]     (default 256 MiB, 5 rounds)
 *
 * A shared mapping of a file in /dev/shm (as an arena is a shared mapping
 * of the pool file), mapped with 4 KiB pages (as a tracked heap is:
 * preload/track.c), registered for asynchronous write protection with the
 * project's own tracking calls (tracking/scan.c). Each round re-arms the
 * whole range with one scan, then writes one byte of every page (each
 * write a fault the kernel resolves by itself), then writes them all
 * again (no faults). Prints the medians, per page, of both passes and the
 * scan's time.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../common/error.h"
#include "../tracking/track.h"

#define PAGE 4096ull

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), by_value);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Writes one byte of every page of [p, p+len); returns ns per page. */
static double touch(volatile uint8_t *p, uint64_t len, uint8_t v)
{
	double t0 = now_ns();
	for (uint64_t at = 0; at < len; at += PAGE)
		p[at] = v;
	return (now_ns() - t0) / (double)(len / PAGE);
}

int main(int argc, char **argv)
{
	uint64_t len = (argc > 1 ? strtoull(argv[1], NULL, 10) : 256) << 20;
	int rounds = argc > 2 ? atoi(argv[2]) : 5;
	if (!len || rounds < 1 || rounds > 100) {
		fprintf(stderr, "usage: wp_fault [MIB [ROUNDS]]\n");
		return 2;
	}
	char path[] = "/dev/shm/cxlcr-wp-fault-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0 || ftruncate(fd, (off_t)len) < 0) {
		fprintf(stderr, "wp_fault: %s: %s\n", path, strerror(errno));
		return 1;
	}
	unlink(path);
	uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		fprintf(stderr, "wp_fault: mmap: %s\n", strerror(errno));
		return 1;
	}
	madvise(p, len, MADV_NOHUGEPAGE);
	memset(p, 1, len); /* present and written: what a filled heap is */
	int uffd = cxlcr_track_make_uffd();
	int pagemap = cxlcr_track_open(getpid());
	if (uffd < 0 || pagemap < 0 || cxlcr_track_register(uffd, (uintptr_t)p, (uintptr_t)p + len) < 0) {
		fprintf(stderr, "wp_fault: %s\n", cxlcr_last_error());
		return 1;
	}
	double faulted[100], plain[100], scan[100];
	struct cxlcr_written w = { 0 };
	for (int r = -1; r < rounds; r++) { /* round -1: the first scan, a full round */
		w.count = 0;
		double t0 = now_ns();
		if (cxlcr_track_scan(pagemap, (uintptr_t)p, (uintptr_t)p + len, &w) != 0) {
			fprintf(stderr, "wp_fault: scan: %s\n", cxlcr_last_error());
			return 1;
		}
		double s = now_ns() - t0;
		double f = touch(p, len, (uint8_t)(r + 2));
		double q = touch(p, len, (uint8_t)(r + 3));
		if (r >= 0) {
			scan[r] = s / 1e6;
			faulted[r] = f;
			plain[r] = q;
		}
	}
	printf("wp_fault: %llu MiB, 4 KiB pages, medians of %d rounds: first write after a re-arm %.0f ns a page, "
	       "a write to a writable page %.0f ns a page (%.0fx); the scan that re-arms %.1f ms\n",
	       (unsigned long long)(len >> 20), rounds, median(faulted, rounds), median(plain, rounds),
	       median(faulted, rounds) / median(plain, rounds), median(scan, rounds));
	cxlcr_written_free(&w);
	return 0;
}
