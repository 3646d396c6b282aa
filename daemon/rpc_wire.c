#include <errno.h>
#include <poll.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/util.h"
#include "control.pb-c.h"
#include "rpc_wire.h"

_Static_assert(CTL_KEY_BYTES == crypto_auth_KEYBYTES, "the pod key is a crypto_auth key");

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

uint8_t *ctl_request_encode(const uint8_t challenge[CTL_CHALLENGE_BYTES], const uint8_t key[CTL_KEY_BYTES],
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
	size_t n = ctl_request__get_packed_size(&r);
	uint8_t *packed = malloc(n ? n : 1), mac[crypto_auth_BYTES];
	if (!packed) {
		cxlcr_error("out of memory");
		return NULL;
	}
	ctl_request__pack(&r, packed);
	crypto_auth(mac, packed, n, key);
	CtlEnvelope e = CTL_ENVELOPE__INIT;
	e.request.data = packed;
	e.request.len = n;
	e.mac.data = mac;
	e.mac.len = sizeof(mac);
	uint8_t *frame = frame_of(&e.base, len);
	free(packed);
	return frame;
}

size_t ctl_frame_encode(uint8_t *buf, size_t cap, int stream, const void *data, size_t n, int status,
			const char *refused)
{
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
	size_t len = ctl_frame__get_packed_size(&f);
	if (cap < 4 || len > cap - 4)
		return 0;
	buf[0] = (uint8_t)(len >> 24), buf[1] = (uint8_t)(len >> 16), buf[2] = (uint8_t)(len >> 8), buf[3] = (uint8_t)len;
	ctl_frame__pack(&f, buf + 4);
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
		      const uint8_t key[CTL_KEY_BYTES], int *argc, char ***argv, char *why, size_t why_len)
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
	else if (!(r = ctl_request__unpack(NULL, e->request.len, e->request.data)))
		bad = "malformed request";
	else if (r->challenge.len != CTL_CHALLENGE_BYTES ||
		 sodium_memcmp(r->challenge.data, challenge, CTL_CHALLENGE_BYTES) != 0)
		bad = "replayed (it answers another connection's challenge)";
	else if ((*argv = copy_args(r, &bad)))
		*argc = (int)r->n_argv;
	if (r)
		ctl_request__free_unpacked(r, NULL);
	if (e)
		ctl_envelope__free_unpacked(e, NULL);
	if (bad)
		snprintf(why, why_len, "%s", bad);
	return bad ? -1 : 0;
}

int ctl_frame_parse(const uint8_t *buf, size_t len, struct ctl_frame *f, char *why, size_t why_len)
{
	const char *bad = NULL;
	memset(f, 0, sizeof(*f));
	CtlFrame *m = ctl_frame__unpack(NULL, len, buf);
	if (!m) {
		bad = "malformed answer";
	} else if (m->refused) {
		f->kind = CTL_REFUSED;
		snprintf(f->refused, sizeof(f->refused), "%s", m->refused);
		f->refused[strcspn(f->refused, "\n")] = 0;
	} else if (m->has_status) {
		f->kind = CTL_STATUS;
		f->status = m->status;
		if (m->status < 0 || m->status > 255)
			bad = "malformed answer (exit status out of range)";
	} else if (m->has_stream && m->has_data && (m->stream == 1 || m->stream == 2) && m->data.len <= CTL_CHUNK) {
		f->kind = CTL_OUTPUT;
		f->stream = (int)m->stream;
		f->len = m->data.len;
		if (!(f->data = malloc(f->len ? f->len : 1)))
			bad = "out of memory";
		else
			memcpy(f->data, m->data.data, f->len);
	} else {
		bad = "malformed answer";
	}
	if (m)
		ctl_frame__free_unpacked(m, NULL);
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

/* Reads exactly n bytes by deadline. */
static int read_by(int fd, uint8_t *p, size_t n, uint64_t deadline)
{
	while (n) {
		uint64_t now = cxlcr_mono_ns();
		int ms = now >= deadline ? 0 : (int)((deadline - now + 999999) / 1000000);
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
	if (read_by(fd, head, 4, deadline) < 0)
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
	if (read_by(fd, b, n, deadline) < 0) {
		int e = errno;
		free(b);
		errno = e;
		return -1;
	}
	*buf = b;
	*len = n;
	return 0;
}
