#include <errno.h>
#include <poll.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/seal.h"
#include "../common/util.h"
#include "control.pb-c.h"
#include "rpc_wire.h"

_Static_assert(CTL_KEY_BYTES == crypto_auth_KEYBYTES, "the pod key is a crypto_auth key");
_Static_assert(crypto_auth_BYTES == CXLCR_SEAL_MAC_BYTES, "crypto_auth is HMAC-SHA-512-256, as the seal");
_Static_assert(CTL_NONCE_BYTES == CXLCR_SEAL_NONCE_BYTES && CTL_KEY_BYTES == CXLCR_SEAL_KEY_BYTES, "one seal");

/* The label of the control protocol's answers (common/seal.h): no
 * request's packed bytes can pass for an answer's, nor a fork API reply. */
#define ANSWER_LABEL "cxlcr answer"

/* The frame of a packed message: its length, then it. */
static uint8_t *frame_of(const ProtobufCMessage *m, size_t *len)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	if (n > CTL_FRAME_MAX) {
		cxlcr_error("message too large for a frame (%zu bytes)", n);
		return NULL;
	}
	uint8_t *buf = malloc(4 + n);
	if (!buf) {
		cxlcr_error("out of memory");
		return NULL;
	}
	buf[0] = (uint8_t)(n >> 24), buf[1] = (uint8_t)(n >> 16), buf[2] = (uint8_t)(n >> 8), buf[3] = (uint8_t)n;
	protobuf_c_message_pack(m, buf + 4);
	*len = 4 + n;
	return buf;
}

uint8_t *ctl_hello_encode(const uint8_t challenge[CTL_CHALLENGE_BYTES], size_t *len)
{
	CtlHello h = CTL_HELLO__INIT;
	h.version = CTL_VERSION;
	h.challenge.data = (uint8_t *)challenge;
	h.challenge.len = CTL_CHALLENGE_BYTES;
	return frame_of(&h.base, len);
}

uint8_t *ctl_request_encode(const uint8_t challenge[CTL_CHALLENGE_BYTES], const struct ctl_seal *seal,
			    int argc, char **argv, size_t *len)
{
	size_t args = 0;
	for (int i = 0; i < argc; i++)
		args += strlen(argv[i]) + 1;
	if (argc < 1 || (unsigned)argc > CTL_ARGS_MAX || args > CTL_ARGS_LEN_MAX) {
		cxlcr_error("command line too long for a request");
		return NULL;
	}
	CtlRequest r = CTL_REQUEST__INIT;
	r.challenge.data = (uint8_t *)challenge;
	r.challenge.len = CTL_CHALLENGE_BYTES;
	r.n_argv = (size_t)argc;
	r.argv = argv;
	r.nonce.data = (uint8_t *)seal->nonce;
	r.nonce.len = CTL_NONCE_BYTES;
	size_t n = ctl_request__get_packed_size(&r);
	uint8_t *packed = malloc(n ? n : 1);
	if (!packed) {
		cxlcr_error("out of memory");
		return NULL;
	}
	ctl_request__pack(&r, packed);
	uint8_t *frame = ctl_envelope_encode(packed, n, seal->key, len);
	free(packed);
	return frame;
}

uint8_t *ctl_envelope_encode(const uint8_t *request, size_t n, const uint8_t key[CTL_KEY_BYTES], size_t *len)
{
	uint8_t mac[crypto_auth_BYTES];
	crypto_auth(mac, request, n, key);
	CtlEnvelope e = CTL_ENVELOPE__INIT;
	e.request.data = (uint8_t *)request;
	e.request.len = n;
	e.mac.data = mac;
	e.mac.len = sizeof(mac);
	return frame_of(&e.base, len);
}

size_t ctl_frame_encode(uint8_t *buf, size_t cap, struct ctl_seal *seal, int stream, const void *data,
			size_t n, int status, const char *refused)
{
	uint8_t packed[CTL_CHUNK + 64], mac[crypto_auth_BYTES];
	CtlFrame f = CTL_FRAME__INIT;
	if (refused) {
		f.refused = (char *)refused;
	} else if (data) {
		f.has_stream = f.has_data = 1;
		f.stream = (uint32_t)stream;
		f.data.data = (uint8_t *)data;
		f.data.len = n;
	} else {
		f.has_status = 1;
		f.status = status;
	}
	size_t flen = ctl_frame__get_packed_size(&f);
	if (flen > sizeof(packed))
		return 0;
	ctl_frame__pack(&f, packed);
	CtlAnswer a = CTL_ANSWER__INIT;
	a.frame.data = packed;
	a.frame.len = flen;
	if (!refused) {
		cxlcr_seal_mac(mac, seal->key, ANSWER_LABEL, seal->nonce, seal->seq, packed, flen);
		a.has_mac = 1;
		a.mac.data = mac;
		a.mac.len = sizeof(mac);
	}
	size_t len = ctl_answer__get_packed_size(&a);
	if (cap < 4 || len > cap - 4)
		return 0;
	buf[0] = (uint8_t)(len >> 24), buf[1] = (uint8_t)(len >> 16), buf[2] = (uint8_t)(len >> 8), buf[3] = (uint8_t)len;
	ctl_answer__pack(&a, buf + 4);
	if (!refused)
		seal->seq++;
	return 4 + len;
}

int ctl_hello_parse(const uint8_t *buf, size_t len, uint8_t challenge[CTL_CHALLENGE_BYTES], char *why,
		    size_t why_len)
{
	CtlHello *h = ctl_hello__unpack(NULL, len, buf);
	const char *bad = !h ? "malformed greeting" :
			  h->version != CTL_VERSION ? "greeting of another protocol version" :
			  h->challenge.len != CTL_CHALLENGE_BYTES ? "greeting without a challenge" : NULL;
	if (!bad)
		memcpy(challenge, h->challenge.data, CTL_CHALLENGE_BYTES);
	if (h)
		ctl_hello__free_unpacked(h, NULL);
	if (bad)
		snprintf(why, why_len, "%s", bad);
	return bad ? -1 : 0;
}

/* A request's arguments in one allocation: the pointers, then the text. */
static char **copy_args(CtlRequest *r, const char **bad)
{
	size_t text = 0;
	if (r->n_argv < 1 || r->n_argv > CTL_ARGS_MAX) {
		*bad = "malformed request (no verb, or too many arguments)";
		return NULL;
	}
	for (size_t i = 0; i < r->n_argv; i++)
		text += strlen(r->argv[i]) + 1;
	if (text > CTL_ARGS_LEN_MAX) {
		*bad = "malformed request (arguments too long)";
		return NULL;
	}
	char **argv = malloc((r->n_argv + 1) * sizeof(char *) + text);
	if (!argv) {
		*bad = "out of memory";
		return NULL;
	}
	char *at = (char *)(argv + r->n_argv + 1);
	for (size_t i = 0; i < r->n_argv; i++) {
		size_t n = strlen(r->argv[i]) + 1;
		memcpy(at, r->argv[i], n);
		argv[i] = at;
		at += n;
	}
	argv[r->n_argv] = NULL;
	return argv;
}

int ctl_request_parse(const uint8_t *buf, size_t len, const uint8_t challenge[CTL_CHALLENGE_BYTES],
		      const uint8_t key[CTL_KEY_BYTES], int *argc, char ***argv,
		      uint8_t nonce[CTL_NONCE_BYTES], char *why, size_t why_len)
{
	const char *bad = NULL;
	CtlRequest *r = NULL;
	*argv = NULL;
	CtlEnvelope *e = ctl_envelope__unpack(NULL, len, buf);
	if (!e)
		bad = "malformed request";
	else if (e->mac.len != crypto_auth_BYTES ||
		 crypto_auth_verify(e->mac.data, e->request.data, e->request.len, key) != 0)
		bad = "not authenticated (no MAC under the pod's key)";
	else if (!(r = ctl_request__unpack(NULL, e->request.len, e->request.data)) ||
		 r->nonce.len != CTL_NONCE_BYTES)
		bad = "malformed request";
	else if (r->challenge.len != CTL_CHALLENGE_BYTES ||
		 sodium_memcmp(r->challenge.data, challenge, CTL_CHALLENGE_BYTES) != 0)
		bad = "replayed (it answers another connection's challenge)";
	else if ((*argv = copy_args(r, &bad))) {
		*argc = (int)r->n_argv;
		memcpy(nonce, r->nonce.data, CTL_NONCE_BYTES);
	}
	if (r)
		ctl_request__free_unpacked(r, NULL);
	if (e)
		ctl_envelope__free_unpacked(e, NULL);
	if (bad)
		snprintf(why, why_len, "%s", bad);
	return bad ? -1 : 0;
}

/* A frame's fields into f: NULL, or why they make no answer. */
static const char *frame_fields(const CtlFrame *m, struct ctl_frame *f)
{
	if (m->refused) {
		f->kind = CTL_REFUSED;
		snprintf(f->refused, sizeof(f->refused), "%s", m->refused);
		f->refused[strcspn(f->refused, "\n")] = 0;
		return NULL;
	}
	if (m->has_status) {
		f->kind = CTL_STATUS;
		f->status = m->status;
		return m->status < 0 || m->status > 255 ? "malformed answer (exit status out of range)" : NULL;
	}
	if (m->has_stream && m->has_data && (m->stream == 1 || m->stream == 2) && m->data.len <= CTL_CHUNK) {
		f->kind = CTL_OUTPUT;
		f->stream = (int)m->stream;
		f->len = m->data.len;
		if (!(f->data = malloc(f->len ? f->len : 1)))
			return "out of memory";
		memcpy(f->data, m->data.data, f->len);
		return NULL;
	}
	return "malformed answer";
}

/* Whether an answer is the daemon's for seal's request, at its place in
 * the answers (counted if so). A refusal comes unsealed, and first. */
static bool answer_sealed(struct ctl_seal *seal, const CtlAnswer *a, const CtlFrame *m)
{
	if (!a->has_mac)
		return m->refused && seal->seq == 0;
	bool good = cxlcr_seal_check(a->mac.data, a->mac.len, seal->key, ANSWER_LABEL, seal->nonce, seal->seq,
				     a->frame.data, a->frame.len);
	seal->seq += good;
	return good;
}

int ctl_frame_parse(const uint8_t *buf, size_t len, struct ctl_seal *seal, struct ctl_frame *f, char *why,
		    size_t why_len)
{
	const char *bad = NULL;
	CtlFrame *m = NULL;
	memset(f, 0, sizeof(*f));
	CtlAnswer *a = ctl_answer__unpack(NULL, len, buf);
	if (!a || !(m = ctl_frame__unpack(NULL, a->frame.len, a->frame.data)))
		bad = "malformed answer";
	else if (seal && !answer_sealed(seal, a, m))
		bad = "answer not authenticated (no MAC under the pod's key for this request at this place: "
		      "forged or replayed)";
	else
		bad = frame_fields(m, f);
	if (m)
		ctl_frame__free_unpacked(m, NULL);
	if (a)
		ctl_answer__free_unpacked(a, NULL);
	if (bad) {
		free(f->data);
		f->data = NULL;
		snprintf(why, why_len, "%s", bad);
	}
	return bad ? -1 : 0;
}

int ctl_write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
		if (w < 0 && errno == ENOTSOCK)
			w = write(fd, c, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

int ctl_ms_left(uint64_t deadline)
{
	uint64_t now = cxlcr_mono_ns();
	return now >= deadline ? 0 : (int)((deadline - now + 999999) / 1000000);
}

int ctl_read_exact(int fd, void *buf, size_t n, uint64_t deadline)
{
	uint8_t *p = buf;
	while (n) {
		int ms = ctl_ms_left(deadline);
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		int rc = ms ? poll(&pf, 1, ms) : 0;
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc == 0) {
			errno = ETIMEDOUT;
			return -1;
		}
		ssize_t r = read(fd, p, n);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0) {
			errno = EPIPE;
			return -1;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

int ctl_read_frame(int fd, uint8_t **buf, size_t *len, uint64_t deadline)
{
	uint8_t head[4];
	*buf = NULL;
	if (ctl_read_exact(fd, head, 4, deadline) < 0)
		return -1;
	size_t n = (size_t)head[0] << 24 | (size_t)head[1] << 16 | (size_t)head[2] << 8 | head[3];
	if (n > CTL_FRAME_MAX) {
		errno = EMSGSIZE;
		return -1;
	}
	uint8_t *b = malloc(n ? n : 1);
	if (!b) {
		errno = ENOMEM;
		return -1;
	}
	if (ctl_read_exact(fd, b, n, deadline) < 0) {
		int e = errno;
		free(b);
		errno = e;
		return -1;
	}
	*buf = b;
	*len = n;
	return 0;
}
