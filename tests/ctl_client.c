/*
 * A client of the control protocol that can do what an attacker on the
 * network can: tests/t_ctl_tcp.sh uses it to send a request under a wrong
 * key, to replay a request another connection sent, and to hand a client
 * answers recorded from another request (as a man in the middle would).
 *
 *   ctl_client ADDR PORT [--random-key] [--save FILE] [--save-answers FILE]
 *              [--answers FILE] -- VERB ARGS...
 *       one request (under the pool's key, or a random one); its sent
 *       envelope frame kept in FILE; the answers, checked against the
 *       request's seal, kept in --save-answers's FILE, or taken from
 *       --answers's FILE instead of from the daemon; prints the verb's
 *       output, then "status N" or "refused: WHY", or "bad answer: WHY"
 *   ctl_client ADDR PORT --replay FILE
 *       sends FILE's frame, as recorded, as the request of a new connection
 *       (its answers unchecked: the replayer has no key)
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/hosts.h"
#include "../common/pool.h"
#include "../common/util.h"
#include "../daemon/rpc_wire.h"

static int usage(void)
{
	fprintf(stderr, "usage: ctl_client ADDR PORT [--random-key] [--save FILE] [--save-answers FILE]\n"
			"                  [--answers FILE] -- VERB...\n"
			"       ctl_client ADDR PORT --replay FILE\n");
	return 2;
}

static int dial(const char *ip, int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int s = socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0 || inet_pton(AF_INET, ip, &a.sin_addr) != 1 || connect(s, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("connect");
		exit(1);
	}
	return s;
}

int main(int argc, char **argv)
{
	if (argc < 4 || sodium_init() < 0)
		return usage();
	const char *ip = argv[1], *save = NULL, *replay = NULL, *save_answers = NULL, *answers = NULL;
	int port = atoi(argv[2]), i = 3;
	bool random_key = false;
	for (; i < argc; i++) {
		if (!strcmp(argv[i], "--random-key"))
			random_key = true;
		else if (!strcmp(argv[i], "--save") && i + 1 < argc)
			save = argv[++i];
		else if (!strcmp(argv[i], "--replay") && i + 1 < argc)
			replay = argv[++i];
		else if (!strcmp(argv[i], "--save-answers") && i + 1 < argc)
			save_answers = argv[++i];
		else if (!strcmp(argv[i], "--answers") && i + 1 < argc)
			answers = argv[++i];
		else if (!strcmp(argv[i], "--")) {
			i++;
			break;
		} else
			return usage();
	}
	if (!replay && i >= argc)
		return usage();
	struct ctl_seal seal = { .seq = 0 };
	uint8_t *key = seal.key, challenge[CTL_CHALLENGE_BYTES], *buf, *req = NULL;
	size_t len, req_len = 0;
	char why[CTL_REFUSED_MAX];
	if (random_key) {
		randombytes_buf(key, sizeof(key));
	} else if (!replay) {
		struct cxlcr_pool pool;
		if (cxlcr_pool_open(&pool, cxlcr_pool_path()) < 0 || cxlcr_pod_key_get(&pool, false, key) != 0) {
			fprintf(stderr, "ctl_client: no pod key: %s\n", cxlcr_last_error());
			return 1;
		}
		cxlcr_pool_close(&pool);
	}
	randombytes_buf(seal.nonce, sizeof(seal.nonce));
	int s = dial(ip, port);
	uint64_t deadline = cxlcr_mono_ns() + 600ull * 1000000000ull;
	if (ctl_write_all(s, CTL_MAGIC, CTL_MAGIC_LEN) < 0 || ctl_read_frame(s, &buf, &len, deadline) < 0 ||
	    ctl_hello_parse(buf, len, challenge, why, sizeof(why)) < 0) {
		fprintf(stderr, "ctl_client: no greeting\n");
		return 1;
	}
	free(buf);
	if (replay) {
		FILE *f = fopen(replay, "rb");
		req = malloc(CTL_FRAME_MAX + 4);
		if (!f || !req || (req_len = fread(req, 1, CTL_FRAME_MAX + 4, f)) == 0) {
			fprintf(stderr, "ctl_client: cannot read %s\n", replay);
			return 1;
		}
		fclose(f);
	} else if (!(req = ctl_request_encode(challenge, &seal, argc - i, argv + i, &req_len))) {
		fprintf(stderr, "ctl_client: %s\n", cxlcr_last_error());
		return 1;
	}
	if (save) {
		FILE *f = fopen(save, "wb");
		if (!f || fwrite(req, 1, req_len, f) != req_len || fclose(f) != 0) {
			fprintf(stderr, "ctl_client: cannot write %s\n", save);
			return 1;
		}
	}
	if (ctl_write_all(s, req, req_len) < 0) {
		fprintf(stderr, "ctl_client: cannot send\n");
		return 1;
	}
	int from = s;
	FILE *keep = NULL;
	if (answers && (from = open(answers, O_RDONLY | O_CLOEXEC)) < 0) {
		fprintf(stderr, "ctl_client: cannot read %s\n", answers);
		return 1;
	}
	if (save_answers && !(keep = fopen(save_answers, "wb"))) {
		fprintf(stderr, "ctl_client: cannot write %s\n", save_answers);
		return 1;
	}
	for (;;) {
		struct ctl_frame f;
		if (ctl_read_frame(from, &buf, &len, deadline) < 0) {
			printf("closed without an answer\n");
			return 1;
		}
		uint8_t head[4] = { (uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8), (uint8_t)len };
		if (keep && (fwrite(head, 1, 4, keep) != 4 || fwrite(buf, 1, len, keep) != len || fflush(keep))) {
			fprintf(stderr, "ctl_client: cannot write %s\n", save_answers);
			return 1;
		}
		if (ctl_frame_parse(buf, len, replay ? NULL : &seal, &f, why, sizeof(why)) < 0) {
			printf("bad answer: %s\n", why);
			return 1;
		}
		free(buf);
		if (f.kind == CTL_REFUSED) {
			printf("refused: %s\n", f.refused);
			return 0;
		}
		if (f.kind == CTL_STATUS) {
			printf("status %d\n", f.status);
			return 0;
		}
		fwrite(f.data, 1, f.len, f.stream == 1 ? stdout : stderr);
		free(f.data);
	}
}
