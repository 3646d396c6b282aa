/*
 * Every parser that faces the network, fed truncated, oversized, mutated
 * and random messages (issue 15 point 3): the control protocol's frames
 * (daemon/rpc_wire.c: the daemon's greeting, the client's request, the
 * daemon's answers, the frame reader) and the fork API's JSON
 * (api/protocol.c: requests on the daemon's side, replies on the client's,
 * and replies sealed for a request over TCP, api_reply_open()).
 * Each must refuse what it cannot accept, with one line, and never crash or
 * read out of bounds (tests/run.sh runs this under UBSan and ASan too); no
 * change to a request under the pod's key may make another request
 * acceptable, and no answer the daemon did not seal for this request, at
 * its place among the answers, is taken (forged, replayed, reordered,
 * repeated, altered). Deterministic: a fixed seed and a fixed number of rounds
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

static uint8_t challenge[CTL_CHALLENGE_BYTES];
static struct ctl_seal seal; /* the pod's key and the request's nonce */
static const uint8_t *const key = seal.key;
static char *argv_ok[] = { "migrate", "redis", "--to", "h1", NULL };
static uint8_t reply_key[CXLCR_SEAL_KEY_BYTES]; /* the fork API's, of a token */

/* Whether buf parses as a request; if so, that it is exactly argv_ok. */
static bool request_accepted(const uint8_t *buf, size_t len)
{
	int argc;
	char **argv, why[256];
	uint8_t nonce[CTL_NONCE_BYTES];
	if (ctl_request_parse(buf, len, challenge, key, &argc, &argv, nonce, why, sizeof(why)) < 0) {
		CHECK(why[0] && !strchr(why, '\n'));
		return false;
	}
	CHECK(argc == 4 && !memcmp(nonce, seal.nonce, sizeof(nonce)));
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
	if (ctl_frame_parse(buf, len, NULL, &f, why, sizeof(why)) == 0) {
		CHECK(f.kind == CTL_OUTPUT || f.kind == CTL_STATUS || f.kind == CTL_REFUSED);
		CHECK(f.kind != CTL_OUTPUT || ((f.stream == 1 || f.stream == 2) && f.len <= CTL_CHUNK));
		CHECK(f.kind != CTL_STATUS || (f.status >= 0 && f.status <= 255));
		free(f.data);
	} else {
		CHECK(why[0]);
	}
	/* Checked against the request's seal, only an unsealed refusal can
	 * pass: nothing here was sealed under the key. */
	struct ctl_seal client = seal;
	if (ctl_frame_parse(buf, len, &client, &f, why, sizeof(why)) == 0)
		CHECK(f.kind == CTL_REFUSED && client.seq == 0);
	else
		CHECK(why[0]);
	/* The fork API's parsers take text; a copy with no NUL after it,
	 * so that ASan sees any read past len. */
	char *text = malloc(len ? len : 1);
	memcpy(text, buf, len);
	if (api_request_decode(text, len, &req, why, sizeof(why)) < 0)
		CHECK(why[0]);
	memset(&res, 0, sizeof(res));
	if (api_reply_decode(text, len, &res, why, sizeof(why)) < 0)
		CHECK(why[0]);
	/* Opened as a TCP request on a connection: nothing here was sealed
	 * for its challenge under the key, so nothing is taken. */
	char refusal[API_ERROR_MAX], why_log[API_ERROR_MAX];
	CHECK(api_request_open(text, len, reply_key, seal.nonce, &req, refusal, sizeof(refusal), why_log,
			       sizeof(why_log)) < 0 && refusal[0] && !strchr(refusal, '\n') && why_log[0]);
	uint8_t greeted[CXLCR_SEAL_NONCE_BYTES];
	if (api_greeting_decode(text, len, greeted, why, sizeof(why)) < 0)
		CHECK(why[0] && !strchr(why, '\n'));
	/* Opened as a TCP reply to a request: nothing here was sealed under
	 * the reply key, so nothing is taken (a refusal is an error too). */
	CHECK(api_reply_open(text, len, reply_key, seal.nonce, &res, why, sizeof(why)) < 0 && why[0] &&
	      !strchr(why, '\n'));
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

/* Whether line opens as a reply sealed for seal.nonce under reply_key; if
 * it does, that it reads as want. */
static bool reply_taken(const char *line, size_t len, const struct cxlcr_fork_result *want, char *why,
			size_t why_len)
{
	static struct cxlcr_fork_result got;
	char *copy = malloc(len ? len : 1); /* no NUL after it: ASan sees a read past len */
	memcpy(copy, line, len);
	int rc = api_reply_open(copy, len, reply_key, seal.nonce, &got, why, why_len);
	free(copy);
	if (rc < 0) {
		CHECK(why[0] && !strchr(why, '\n'));
		return false;
	}
	CHECK(!memcmp(&got, want, sizeof(got)), "a reply taken as another");
	return true;
}

/* The fork API's replies over TCP (api/protocol.h): sealed for the
 * request's nonce under the reply key of the pod's token. */
static void fork_api_replies(void)
{
	static struct cxlcr_fork_result res, none;
	char why[API_ERROR_MAX];
	size_t n, sl;
	const char *token = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
	CHECK(api_mac_key(token, reply_key) == 0);
	uint8_t k[CXLCR_SEAL_KEY_BYTES];
	CHECK(api_mac_key("00112233445566778899aabbccddeeff00112233445566778899aabbccddeefg", k) < 0 &&
	      api_mac_key("0011", k) < 0 && api_mac_key("", k) < 0 &&
	      api_mac_key("00112233445566778899AABBCCDDEEFF00112233445566778899aabbccddeeff", k) < 0);
	res.count = 1;
	strcpy(res.child[0].name, "web.1");
	strcpy(res.child[0].host, "h1");
	strcpy(res.child[0].address, "10.79.1.5");
	res.child[0].pid = 41;
	res.freeze_ms = 12.5;
	strcpy(res.mode, "share");
	char *line = api_reply_encode(&res, &n);
	char *sealed = api_reply_seal(line, n, reply_key, seal.nonce, &sl);
	CHECK(line && sealed && sealed[sl - 1] == '\n' && !memchr(sealed, '\n', sl - 1));
	sl--; /* as api_read_line() hands it on */
	CHECK(reply_taken(sealed, sl, &res, why, sizeof(why)), "%s", why);
	SAY("a reply sealed for the request's nonce under the token's reply key is taken: %.60s...", sealed);

	uint8_t nonce_saved[CXLCR_SEAL_NONCE_BYTES];
	memcpy(nonce_saved, seal.nonce, sizeof(nonce_saved));
	seal.nonce[7] ^= 4;
	CHECK(!reply_taken(sealed, sl, &res, why, sizeof(why)) && !strcmp(why, API_REPLY_FORGED));
	memcpy(seal.nonce, nonce_saved, sizeof(nonce_saved));
	SAY("the same reply to another request (replayed): refused, '%s'", why);
	reply_key[3] ^= 1;
	CHECK(!reply_taken(sealed, sl, &res, why, sizeof(why)) && !strcmp(why, API_REPLY_FORGED));
	reply_key[3] ^= 1;
	char *mac = strstr(sealed, "\"mac\":\"");
	CHECK(mac);
	mac += 7;
	char digit = *mac;
	*mac = digit == '0' ? '1' : '0';
	CHECK(!reply_taken(sealed, sl, &res, why, sizeof(why)) && !strcmp(why, API_REPLY_FORGED));
	*mac = digit;
	CHECK(reply_taken(sealed, sl, &res, why, sizeof(why)));
	SAY("under another key (forged), a digit of its MAC changed (wrong tag): refused");

	CHECK(!reply_taken(line, n - 1, &res, why, sizeof(why)) && !strcmp(why, API_REPLY_FORGED));
	size_t el;
	char *refusal = api_error_encode("not authorised", &el);
	CHECK(!reply_taken(refusal, el - 1, &none, why, sizeof(why)) && !strcmp(why, "not authorised"));
	CHECK(api_reply_open(refusal, el - 1, NULL, seal.nonce, &none, why, sizeof(why)) < 0 &&
	      !strcmp(why, "not authorised"));
	CHECK(api_reply_open(sealed, sl, NULL, seal.nonce, &none, why, sizeof(why)) < 0 &&
	      !strcmp(why, API_REPLY_FORGED));
	char *sealed_refusal = api_reply_seal(refusal, el, reply_key, seal.nonce, &el);
	CHECK(!reply_taken(sealed_refusal, el - 1, &none, why, sizeof(why)) && !strcmp(why, "not authorised"));
	const char *extra = "{\"sealed\": \"{}\", \"mac\": \"00\", \"ok\": true}";
	CHECK(!reply_taken(extra, strlen(extra), &none, why, sizeof(why)) && strstr(why, "malformed reply"));
	SAY("an unsealed success: refused; an unsealed refusal: taken as the refusal it is ('%s'), sealed or not; "
	    "a client without a key takes only refusals; an envelope with more members: malformed", "not authorised");

	for (size_t cut = 0; cut < sl; cut++)
		CHECK(!reply_taken(sealed, cut, &res, why, sizeof(why)));
	SAY("all %zu truncations of the sealed reply: refused", sl);
	long taken = 0, rounds = 0;
	for (size_t i = 0; i < sl; i++)
		for (int bit = 0; bit < 8; bit++, rounds++) {
			sealed[i] ^= (char)(1u << bit);
			taken += reply_taken(sealed, sl, &res, why, sizeof(why));
			sealed[i] ^= (char)(1u << bit);
		}
	CHECK(taken == 0, "%ld one-bit changes taken", taken);
	SAY("all %ld one-bit changes of it: refused (the MAC's digits have one spelling)", rounds);
	size_t cap = API_REPLY_MAX + 128;
	char *big = malloc(cap);
	int bl = snprintf(big, cap, "{\"sealed\": \"%0*d\", \"mac\": \"%064d\"}", API_REPLY_MAX, 0, 0);
	CHECK(bl > 0 && (size_t)bl < cap && !reply_taken(big, (size_t)bl, &res, why, sizeof(why)));
	free(big);
	SAY("an oversized sealed line: refused");
	free(sealed_refusal);
	free(refusal);
	free(sealed);
	free(line);
}

/* The fork API's requests over TCP (api/protocol.h): sealed for the
 * connection's challenge under the key of the pod's token. Every
 * truncation and every one-bit change of a sealed request is refused. */
static void fork_api_requests(void)
{
	struct api_request want = { .op = "fork", .service = "web", .host = "h1", .count = 2 }, got;
	char err[API_ERROR_MAX], why[API_ERROR_MAX];
	size_t n, sl;
	char *line = api_request_encode(&want, &n);
	char *sealed = api_request_seal(line, n, reply_key, seal.nonce, &sl);
	CHECK(line && sealed);
	sl--;
	CHECK(api_request_open(sealed, sl, reply_key, seal.nonce, &got, err, sizeof(err), why, sizeof(why)) == 0 &&
	      got.count == 2 && !strcmp(got.host, "h1"), "%s", why);
	for (size_t cut = 0; cut < sl; cut++)
		CHECK(api_request_open(sealed, cut, reply_key, seal.nonce, &got, err, sizeof(err), why, sizeof(why)) < 0);
	long taken = 0, rounds = 0;
	for (size_t i = 0; i < sl; i++)
		for (int bit = 0; bit < 8; bit++, rounds++) {
			sealed[i] ^= (char)(1u << bit);
			taken += api_request_open(sealed, sl, reply_key, seal.nonce, &got, err, sizeof(err), why,
						  sizeof(why)) == 0;
			sealed[i] ^= (char)(1u << bit);
		}
	CHECK(taken == 0, "%ld one-bit changes of a sealed request taken", taken);
	SAY("a sealed request: opened; all %zu truncations and %ld one-bit changes of it: refused", sl, rounds);
	free(line);
	free(sealed);
}

int main(void)
{
	const char *env = getenv("CTL_FUZZ_ROUNDS");
	long rounds = env ? atol(env) : 300000;
	CHECK(sodium_init() >= 0);
	for (size_t i = 0; i < sizeof(seal.key); i++)
		seal.key[i] = (uint8_t)next(), challenge[i] = (uint8_t)next(), seal.nonce[i] = (uint8_t)next();

	size_t frame_len;
	uint8_t *frame = ctl_request_encode(challenge, &seal, 4, argv_ok, &frame_len);
	CHECK(frame && frame_len > 4);
	const uint8_t *body = frame + 4;
	size_t body_len = frame_len - 4;
	CHECK(request_accepted(body, body_len));
	SAY("a request under the key and the connection's challenge is accepted");

	for (size_t n = 0; n < body_len; n++)
		CHECK(!request_accepted(body, n));
	SAY("all %zu of its truncations are refused", body_len);

	struct ctl_seal other = seal;
	other.key[0] ^= 1;
	size_t l2;
	uint8_t *forged = ctl_request_encode(challenge, &other, 4, argv_ok, &l2);
	CHECK(!request_accepted(forged + 4, l2 - 4));
	free(forged);
	uint8_t c2[CTL_CHALLENGE_BYTES];
	memcpy(c2, challenge, sizeof(c2));
	c2[31] ^= 0x80;
	uint8_t *replay = ctl_request_encode(c2, &seal, 4, argv_ok, &l2);
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
			r.nonce.data = seal.nonce;
			r.nonce.len = sizeof(seal.nonce);
			size_t n = ctl_request__get_packed_size(&r), en;
			uint8_t *packed = malloc(n + 1);
			ctl_request__pack(&r, packed);
			uint8_t *signed_req = ctl_envelope_encode(packed, n, key, &en);
			CHECK(signed_req != NULL);
			CHECK(!request_accepted(signed_req + 4, en - 4));
			free(signed_req);
			free(packed);
		}
		SAY("%u arguments, one argument of %u bytes, no verb: refused although signed", CTL_ARGS_MAX + 1,
		    CTL_ARGS_LEN_MAX + 1);
		CHECK(ctl_request_encode(challenge, &seal, CTL_ARGS_MAX + 1, many, &l2) == NULL);
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
		static uint8_t a[CTL_CHUNK + 128], b[CTL_CHUNK + 128], c[CTL_CHUNK + 128];
		frames[0] = a, frames[1] = b, frames[2] = c;
		memset(out, 'o', sizeof(out));
		struct ctl_seal daemon = seal, client = seal;
		lens[0] = ctl_frame_encode(a, sizeof(a), &daemon, 1, out, CTL_CHUNK, 0, NULL);
		lens[1] = ctl_frame_encode(b, sizeof(b), &daemon, 0, NULL, 0, 3, NULL);
		lens[2] = ctl_frame_encode(c, sizeof(c), NULL, 0, NULL, 0, 0, refusal);
		CHECK(daemon.seq == 2);
		CHECK(ctl_frame_encode(a + 0, 16, &daemon, 1, out, CTL_CHUNK, 0, NULL) == 0 && daemon.seq == 2);
		for (int k = 0; k < 3; k++) {
			struct ctl_frame f;
			char why[256];
			CHECK(lens[k] > 4);
			if (k == 2)
				client = seal; /* a refusal is a request's first and only answer */
			CHECK(ctl_frame_parse(frames[k] + 4, lens[k] - 4, &client, &f, why, sizeof(why)) == 0, "%s",
			      why);
			CHECK((int)f.kind == k + 1);
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
		CtlAnswer wrap = CTL_ANSWER__INIT;
		wrap.frame.data = bb;
		wrap.frame.len = bl;
		size_t wl = ctl_answer__get_packed_size(&wrap);
		uint8_t *wb = malloc(wl);
		ctl_answer__pack(&wrap, wb);
		struct ctl_frame f;
		CHECK(ctl_frame_parse(wb, wl, NULL, &f, why, sizeof(why)) < 0 && f.data == NULL);
		free(wb);
		free(bb);
		SAY("answers and greeting parse, their truncations are refused or read within bounds, "
		    "output over %u bytes in a frame is refused", CTL_CHUNK);

		/* Answers that are not this request's, or not at their place. */
		struct ctl_seal c1 = seal;
		const char *const not_ours = "answer not authenticated";
#define REFUSED(s, k) (ctl_frame_parse(frames[k] + 4, lens[k] - 4, &(s), &f, why, sizeof(why)) < 0 && \
		       strstr(why, not_ours) && f.data == NULL)
		c1.key[5] ^= 0x10;
		CHECK(REFUSED(c1, 0));
		SAY("an answer sealed under another key (forged): refused, '%s'", why);
		c1 = seal;
		c1.nonce[0] ^= 1;
		CHECK(REFUSED(c1, 0) && REFUSED(c1, 1));
		SAY("answers sealed for another request's nonce (replayed): refused");
		c1 = seal;
		CHECK(REFUSED(c1, 1) && c1.seq == 0);
		SAY("the status before the output (reordered, or output dropped): refused");
		CHECK(ctl_frame_parse(frames[0] + 4, lens[0] - 4, &c1, &f, why, sizeof(why)) == 0 && c1.seq == 1);
		free(f.data);
		CHECK(REFUSED(c1, 0) && REFUSED(c1, 2));
		SAY("the output twice (repeated), a refusal after an answer: refused");
		c1 = seal;
		for (size_t i = 4; i < lens[1]; i++)
			for (int bit = 0; bit < 8; bit++) {
				b[i] ^= (uint8_t)(1u << bit);
				struct ctl_seal c3 = seal;
				/* altered: refused, or (a bit of a length) malformed */
				CHECK(ctl_frame_parse(b + 4, lens[1] - 4, &c3, &f, why, sizeof(why)) < 0 ||
				      (c3.seq == 0 && f.kind == CTL_REFUSED));
				c3 = seal;
				c3.seq = 1; /* where the status is */
				CHECK(ctl_frame_parse(b + 4, lens[1] - 4, &c3, &f, why, sizeof(why)) < 0, "bit %d of byte %zu", bit, i);
				b[i] ^= (uint8_t)(1u << bit);
			}
		CtlAnswer *strip = ctl_answer__unpack(NULL, lens[0] - 4, a + 4);
		CHECK(strip);
		strip->has_mac = 0;
		size_t sl = ctl_answer__get_packed_size(strip);
		uint8_t *sb = malloc(sl);
		ctl_answer__pack(strip, sb);
		ctl_answer__free_unpacked(strip, NULL);
		CHECK(ctl_frame_parse(sb, sl, &c1, &f, why, sizeof(why)) < 0 && strstr(why, not_ours));
		free(sb);
		SAY("every one-bit change of a status answer, an output answer without its MAC: refused");
#undef REFUSED
	}

	fork_api_replies();
	fork_api_requests();

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
