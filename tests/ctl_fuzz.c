/*
 * Every parser that faces the network, fed truncated, oversized, mutated
 * and random messages (issue 15 point 3): the control protocol's frames
 * (daemon/rpc_wire.c: the daemon's greeting, the client's request, the
 * daemon's answers, the frame reader) and the fork API's JSON
 * (api/protocol.c: requests on the daemon's side, replies on the client's).
 * Each must refuse what it cannot accept, with one line, and never crash or
 * read out of bounds (tests/run.sh runs this under UBSan and ASan too); no
 * change to a request under the pod's key may make another request
 * acceptable. Deterministic: a fixed seed and a fixed number of rounds
 * (a few seconds; CTL_FUZZ_ROUNDS changes it).
 */
#include <sodium.h>
#include <sys/socket.h>

#include "test.h"
#include "../api/protocol.h"
#include "../common/util.h"
#include "../daemon/rpc_wire.h"
#include "control.pb-c.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void)
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return rng;
}

static uint8_t key[CTL_KEY_BYTES], challenge[CTL_CHALLENGE_BYTES];
static char *argv_ok[] = { "migrate", "redis", "--to", "h1", NULL };

/* Whether buf parses as a request; if so, that it is exactly argv_ok. */
static bool request_accepted(const uint8_t *buf, size_t len)
{
	int argc;
	char **argv, why[256];
	if (ctl_request_parse(buf, len, challenge, key, &argc, &argv, why, sizeof(why)) < 0) {
		CHECK(why[0] && !strchr(why, '\n'));
		return false;
	}
	CHECK(argc == 4);
	for (int i = 0; i < 4; i++)
		CHECK(!strcmp(argv[i], argv_ok[i]));
	CHECK(argv[4] == NULL);
	free(argv);
	return true;
}

static void feed_all(const uint8_t *buf, size_t len)
{
	char why[256];
	uint8_t c[CTL_CHALLENGE_BYTES];
	struct ctl_frame f;
	struct api_request req;
	struct cxlcr_fork_result res;
	request_accepted(buf, len);
	if (ctl_hello_parse(buf, len, c, why, sizeof(why)) < 0)
		CHECK(why[0]);
	if (ctl_frame_parse(buf, len, &f, why, sizeof(why)) == 0) {
		CHECK(f.kind == CTL_OUTPUT || f.kind == CTL_STATUS || f.kind == CTL_REFUSED);
		CHECK(f.kind != CTL_OUTPUT || ((f.stream == 1 || f.stream == 2) && f.len <= CTL_CHUNK));
		CHECK(f.kind != CTL_STATUS || (f.status >= 0 && f.status <= 255));
		free(f.data);
	} else {
		CHECK(why[0]);
	}
	/* The fork API's parsers take text; a copy with no NUL after it,
	 * so that ASan sees any read past len. */
	char *text = malloc(len ? len : 1);
	memcpy(text, buf, len);
	if (api_request_decode(text, len, &req, why, sizeof(why)) < 0)
		CHECK(why[0]);
	memset(&res, 0, sizeof(res));
	if (api_reply_decode(text, len, &res, why, sizeof(why)) < 0)
		CHECK(why[0]);
	free(text);
}

/* A frame's body through the frame reader, from a socket. */
static int read_through_socket(const uint8_t *bytes, size_t n, uint8_t **body, size_t *len)
{
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	CHECK(ctl_write_all(sv[0], bytes, n) == 0);
	close(sv[0]);
	int rc = ctl_read_frame(sv[1], body, len, cxlcr_mono_ns() + 1000000000ull);
	int e = errno;
	close(sv[1]);
	errno = e;
	return rc;
}

int main(void)
{
	const char *env = getenv("CTL_FUZZ_ROUNDS");
	long rounds = env ? atol(env) : 300000;
	CHECK(sodium_init() >= 0);
	for (size_t i = 0; i < sizeof(key); i++)
		key[i] = (uint8_t)next(), challenge[i] = (uint8_t)next();

	size_t frame_len;
	uint8_t *frame = ctl_request_encode(challenge, key, 4, argv_ok, &frame_len);
	CHECK(frame && frame_len > 4);
	const uint8_t *body = frame + 4;
	size_t body_len = frame_len - 4;
	CHECK(request_accepted(body, body_len));
	SAY("a request under the key and the connection's challenge is accepted");

	for (size_t n = 0; n < body_len; n++)
		CHECK(!request_accepted(body, n));
	SAY("all %zu of its truncations are refused", body_len);

	uint8_t other[CTL_KEY_BYTES];
	memcpy(other, key, sizeof(key));
	other[0] ^= 1;
	size_t l2;
	uint8_t *forged = ctl_request_encode(challenge, other, 4, argv_ok, &l2);
	CHECK(!request_accepted(forged + 4, l2 - 4));
	free(forged);
	uint8_t c2[CTL_CHALLENGE_BYTES];
	memcpy(c2, challenge, sizeof(c2));
	c2[31] ^= 0x80;
	uint8_t *replay = ctl_request_encode(c2, key, 4, argv_ok, &l2);
	CHECK(!request_accepted(replay + 4, l2 - 4));
	free(replay);
	SAY("under a key one bit off, or for another challenge: refused");

	/* Oversized: too many arguments, arguments too long, packed by hand
	 * (the encoder refuses them) and signed with the right key. */
	{
		static char *many[CTL_ARGS_MAX + 1];
		static char big[CTL_ARGS_LEN_MAX + 2];
		for (size_t i = 0; i <= CTL_ARGS_MAX; i++)
			many[i] = "x";
		memset(big, 'a', sizeof(big) - 1);
		char *one_big[] = { "run", big };
		struct { char **argv; size_t n; } cases[] = { { many, CTL_ARGS_MAX + 1 }, { one_big, 2 }, { NULL, 0 } };
		for (size_t c = 0; c < 3; c++) {
			CtlRequest r = CTL_REQUEST__INIT;
			r.challenge.data = challenge;
			r.challenge.len = sizeof(challenge);
			r.argv = cases[c].argv;
			r.n_argv = cases[c].n;
			size_t n = ctl_request__get_packed_size(&r);
			uint8_t *packed = malloc(n + 1), mac[crypto_auth_BYTES];
			ctl_request__pack(&r, packed);
			crypto_auth(mac, packed, n, key);
			CtlEnvelope e = CTL_ENVELOPE__INIT;
			e.request.data = packed;
			e.request.len = n;
			e.mac.data = mac;
			e.mac.len = sizeof(mac);
			size_t en = ctl_envelope__get_packed_size(&e);
			uint8_t *env_buf = malloc(en);
			ctl_envelope__pack(&e, env_buf);
			CHECK(!request_accepted(env_buf, en));
			free(env_buf);
			free(packed);
		}
		SAY("%u arguments, one argument of %u bytes, no verb: refused although signed", CTL_ARGS_MAX + 1,
		    CTL_ARGS_LEN_MAX + 1);
		CHECK(ctl_request_encode(challenge, key, CTL_ARGS_MAX + 1, many, &l2) == NULL);
	}

	/* The frame reader: a length over the limit is refused unread, a
	 * truncated body is a closed connection. */
	{
		uint8_t head[4] = { 0, 0x02, 0, 1 }; /* 128 KiB + 1 */
		uint8_t *b;
		size_t n;
		CHECK(read_through_socket(head, 4, &b, &n) < 0 && errno == EMSGSIZE);
		uint8_t huge[4] = { 0xff, 0xff, 0xff, 0xff };
		CHECK(read_through_socket(huge, 4, &b, &n) < 0 && errno == EMSGSIZE);
		for (size_t cut = 0; cut < frame_len; cut++)
			CHECK(read_through_socket(frame, cut, &b, &n) < 0 && errno == EPIPE);
		CHECK(read_through_socket(frame, frame_len, &b, &n) == 0 && n == body_len && !memcmp(b, body, n));
		free(b);
		SAY("frame reader: lengths over %u refused unread, every truncation a closed connection",
		    CTL_FRAME_MAX);
	}

	/* The daemon's answers and greeting, each truncated. */
	{
		uint8_t out[CTL_CHUNK + 64];
		const char *refusal = "not authenticated";
		size_t lens[3];
		uint8_t *frames[3];
		static uint8_t a[CTL_CHUNK + 64], b[CTL_CHUNK + 64], c[CTL_CHUNK + 64];
		frames[0] = a, frames[1] = b, frames[2] = c;
		memset(out, 'o', sizeof(out));
		lens[0] = ctl_frame_encode(a, sizeof(a), 1, out, CTL_CHUNK, 0, NULL);
		lens[1] = ctl_frame_encode(b, sizeof(b), 0, NULL, 0, 3, NULL);
		lens[2] = ctl_frame_encode(c, sizeof(c), 0, NULL, 0, 0, refusal);
		CHECK(ctl_frame_encode(a + 0, 16, 1, out, CTL_CHUNK, 0, NULL) == 0);
		for (int k = 0; k < 3; k++) {
			struct ctl_frame f;
			char why[256];
			CHECK(lens[k] > 4);
			CHECK(ctl_frame_parse(frames[k] + 4, lens[k] - 4, &f, why, sizeof(why)) == 0);
			free(f.data);
			for (size_t n = 0; n + 4 < lens[k]; n++)
				feed_all(frames[k] + 4, n);
		}
		size_t hl;
		uint8_t *hello = ctl_hello_encode(challenge, &hl), got[CTL_CHALLENGE_BYTES];
		char why[256];
		CHECK(ctl_hello_parse(hello + 4, hl - 4, got, why, sizeof(why)) == 0 &&
		      !memcmp(got, challenge, sizeof(got)));
		for (size_t n = 0; n + 4 < hl; n++)
			CHECK(ctl_hello_parse(hello + 4, n, got, why, sizeof(why)) < 0);
		free(hello);
		/* Output over a chunk, packed by hand (the encoder cannot make
		 * it): refused, not handed on. */
		static uint8_t more[CTL_CHUNK + 1];
		CtlFrame big = CTL_FRAME__INIT;
		big.has_stream = big.has_data = 1;
		big.stream = 2;
		big.data.data = more;
		big.data.len = sizeof(more);
		size_t bl = ctl_frame__get_packed_size(&big);
		uint8_t *bb = malloc(bl);
		ctl_frame__pack(&big, bb);
		struct ctl_frame f;
		CHECK(ctl_frame_parse(bb, bl, &f, why, sizeof(why)) < 0 && f.data == NULL);
		free(bb);
		SAY("answers and greeting parse, their truncations are refused or read within bounds, "
		    "output over %u bytes in a frame is refused", CTL_CHUNK);
	}

	/* Mutations of the signed request, and random messages of random
	 * lengths, through every parser. */
	long accepted = 0;
	uint8_t *buf = malloc(body_len + 4096);
	for (long r = 0; r < rounds; r++) {
		size_t len;
		if (r & 1) {
			len = body_len;
			memcpy(buf, body, len);
			for (int k = 1 + (int)(next() % 4); k > 0; k--)
				buf[next() % len] ^= (uint8_t)(1u << (next() % 8));
			if (next() % 4 == 0)
				len = next() % (body_len + 1);
		} else {
			len = next() % 600;
			for (size_t i = 0; i < len; i++)
				buf[i] = (uint8_t)next();
			if (len > 4 && next() % 2) {
				/* a plausible start: a tag of field 1 or 2, length-delimited */
				buf[0] = (next() % 2) ? 0x0a : 0x12;
				buf[1] = (uint8_t)(next() % 64);
			}
		}
		if (request_accepted(buf, len))
			accepted++;
		feed_all(buf, len);
	}
	free(buf);
	SAY("%ld mutated and random messages through every parser: none crashed, %ld accepted, each "
	    "exactly the signed request", rounds, accepted);
	free(frame);
	printf("ctl_fuzz: ok\n");
	return 0;
}
