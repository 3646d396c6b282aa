/*
 * What authenticating the control protocol's answers costs (issue 15,
 * docs/control-plane.md): the time to seal an answer on the daemon's side
 * (ctl_frame_encode() with the request's seal: the MAC) and to check it on
 * the client's (ctl_frame_parse() with the seal), against the same frame
 * parsed unchecked, for an exit status (the last answer of every verb) and
 * for a full chunk of output (16 KiB). Medians of ROUNDS rounds of N each.
 *
 *   build/bench/ctl_seal [ROUNDS [N]]      (default 21 rounds of 20,000)
 */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/util.h"
#include "../daemon/rpc_wire.h"

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* ns per answer of one round: encode (sealed) and parse, checked or not. */
static double round_ns(int n, bool check, const uint8_t *data, size_t len, int *fails)
{
	static uint8_t frame[CTL_CHUNK + 128];
	struct ctl_seal daemon, client;
	randombytes_buf(daemon.key, sizeof(daemon.key));
	randombytes_buf(daemon.nonce, sizeof(daemon.nonce));
	daemon.seq = 0;
	client = daemon;
	char why[256];
	uint64_t t0 = cxlcr_mono_ns();
	for (int i = 0; i < n; i++) {
		struct ctl_frame f = { .data = NULL };
		size_t l = ctl_frame_encode(frame, sizeof(frame), &daemon, 1, data, len, 0, NULL);
		if (!l || ctl_frame_parse(frame + 4, l - 4, check ? &client : NULL, &f, why, sizeof(why)) < 0)
			(*fails)++;
		free(f.data);
	}
	return (double)(cxlcr_mono_ns() - t0) / n;
}

static double median_ns(int rounds, int n, bool check, const uint8_t *data, size_t len, int *fails)
{
	double *v = malloc(sizeof(double) * (size_t)rounds);
	for (int r = 0; r < rounds; r++)
		v[r] = round_ns(n, check, data, len, fails);
	qsort(v, (size_t)rounds, sizeof(double), cmp);
	double m = v[rounds / 2];
	free(v);
	return m;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 21, n = argc > 2 ? atoi(argv[2]) : 20000, fails = 0;
	if (rounds < 1 || n < 1 || sodium_init() < 0) {
		fprintf(stderr, "usage: ctl_seal [ROUNDS [N]]\n");
		return 2;
	}
	static uint8_t chunk[CTL_CHUNK];
	memset(chunk, 'x', sizeof(chunk));
	struct { const char *what; const uint8_t *data; size_t len; } cases[] = {
		{ "exit status", NULL, 0 }, { "16 KiB of output", chunk, sizeof(chunk) } };
	for (size_t c = 0; c < 2; c++) {
		double sealed = median_ns(rounds, n, true, cases[c].data, cases[c].len, &fails);
		double plain = median_ns(rounds, n, false, cases[c].data, cases[c].len, &fails);
		printf("ctl_seal: %-16s sealed and checked %.2f us, checking skipped %.2f us per answer "
		       "(ratio %.2f; medians of %d rounds of %d)\n",
		       cases[c].what, sealed / 1000, plain / 1000, sealed / plain, rounds, n);
	}
	if (fails) {
		fprintf(stderr, "ctl_seal: %d answers failed\n", fails);
		return 1;
	}
	return 0;
}
