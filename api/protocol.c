#include <errno.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/util.h"
#include "../daemon/json.h"
#include "protocol.h"

int api_say(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

/* The JSON writer of the --json output (daemon/json.c) writes to a FILE:
 * here, a memory stream. */
struct line {
	struct json j;
	char *buf;
	size_t len;
};

static bool line_begin(struct line *l)
{
	l->buf = NULL;
	l->len = 0;
	FILE *f = open_memstream(&l->buf, &l->len);
	if (!f)
		return false;
	json_begin(&l->j, f);
	return true;
}

static char *line_end(struct line *l, size_t *len)
{
	json_end(&l->j); /* "}\n" */
	bool ok = !ferror(l->j.out);
	if (fclose(l->j.out) != 0 || !ok) {
		free(l->buf);
		return NULL;
	}
	*len = l->len;
	return l->buf;
}

char *api_request_encode(const struct api_request *req, size_t *len)
{
	struct line l;
	if (!line_begin(&l))
		return NULL;
	json_str(&l.j, "op", req->op);
	json_str(&l.j, "service", req->service);
	if (strcmp(req->op, "release")) {
		json_str(&l.j, "host", req->host);
		json_u64(&l.j, "count", req->count);
		if (req->mode[0])
			json_str(&l.j, "mode", req->mode);
		if (req->fetch[0])
			json_str(&l.j, "fetch", req->fetch);
	}
	if (req->token[0])
		json_str(&l.j, "token", req->token);
	if (req->nonce[0])
		json_str(&l.j, "nonce", req->nonce);
	return line_end(&l, len);
}

char *api_reply_encode(const struct cxlcr_fork_result *res, size_t *len)
{
	struct line l;
	if (!line_begin(&l))
		return NULL;
	json_bool(&l.j, "ok", true);
	json_array(&l.j, "children");
	for (unsigned i = 0; i < res->count && i < CXLCR_API_MAX_CHILDREN; i++) {
		const struct cxlcr_fork_child *c = &res->child[i];
		json_object(&l.j, NULL);
		json_str(&l.j, "name", c->name);
		json_str(&l.j, "host", c->host);
		json_str(&l.j, "address", c->address);
		json_i64(&l.j, "pid", c->pid);
		json_double(&l.j, "restore_ms", c->restore_ms);
		json_u64(&l.j, "prefetched_pages", c->prefetched_pages);
		json_object_end(&l.j);
	}
	json_array_end(&l.j);
	json_double(&l.j, "freeze_ms", res->freeze_ms);
	json_double(&l.j, "snapshot_ms", res->snapshot_ms);
	json_double(&l.j, "restore_ms", res->restore_ms);
	json_double(&l.j, "total_ms", res->total_ms);
	json_u64(&l.j, "image_bytes", res->image_bytes);
	json_u64(&l.j, "snapshot_bytes", res->snapshot_bytes);
	if (res->mode[0])
		json_str(&l.j, "mode", res->mode);
	return line_end(&l, len);
}

char *api_error_encode(const char *error, size_t *len)
{
	struct line l;
	if (!line_begin(&l))
		return NULL;
	json_bool(&l.j, "ok", false);
	/* One line: the writer escapes newlines, but an error is one anyway. */
	char one[API_ERROR_MAX];
	snprintf(one, sizeof(one), "%s", error && *error ? error : "unknown error");
	one[strcspn(one, "\n")] = 0;
	json_str(&l.j, "error", one);
	return line_end(&l, len);
}

/* What a reply key is derived for (BLAKE2b keyed with the token's bytes):
 * the token travels in requests as a bearer credential, the key never does
 * anything but MAC replies. The label of the MAC sets these MACs apart
 * from the control protocol's (common/seal.h). */
#define REPLY_KEY_LABEL "cxlcr fork API reply key, version 1"
#define REPLY_LABEL     "cxlcr fork API reply"

/* Exactly 2 * n lowercase hex digits (as sodium_bin2hex() writes them:
 * one spelling per value) into n bytes. */
static int hex_exact(const char *hex, uint8_t *out, size_t n)
{
	size_t got = 0;
	const char *end = NULL;
	if (strlen(hex) != 2 * n || strspn(hex, "0123456789abcdef") != 2 * n || sodium_hex2bin(out, n, hex, 2 * n, NULL, &got, &end) != 0 || got != n ||
	    *end)
		return -1;
	return 0;
}

int api_reply_key(const char *token, uint8_t key[CXLCR_SEAL_KEY_BYTES])
{
	uint8_t raw[CXLCR_API_TOKEN_LEN / 2];
	if (sodium_init() < 0 || hex_exact(token, raw, sizeof(raw)) < 0)
		return -1;
	crypto_generichash(key, CXLCR_SEAL_KEY_BYTES, (const unsigned char *)REPLY_KEY_LABEL,
			   strlen(REPLY_KEY_LABEL), raw, sizeof(raw));
	sodium_memzero(raw, sizeof(raw));
	return 0;
}

int api_nonce_parse(const char *hex, uint8_t nonce[CXLCR_SEAL_NONCE_BYTES])
{
	return hex_exact(hex, nonce, CXLCR_SEAL_NONCE_BYTES);
}

char *api_reply_seal(const char *reply, size_t len, const uint8_t key[CXLCR_SEAL_KEY_BYTES],
		     const uint8_t nonce[CXLCR_SEAL_NONCE_BYTES], size_t *out_len)
{
	uint8_t mac[CXLCR_SEAL_MAC_BYTES];
	char hex[2 * CXLCR_SEAL_MAC_BYTES + 1], *inner = strndup(reply, len);
	struct line l;
	if (!inner)
		return NULL;
	inner[strcspn(inner, "\n")] = 0;
	cxlcr_seal_mac(mac, key, REPLY_LABEL, nonce, 0, inner, strlen(inner));
	sodium_bin2hex(hex, sizeof(hex), mac, sizeof(mac));
	if (!line_begin(&l)) {
		free(inner);
		return NULL;
	}
	json_str(&l.j, "sealed", inner);
	json_str(&l.j, "mac", hex);
	free(inner);
	return line_end(&l, out_len);
}

bool api_reply_sealed_by(const char *inner, size_t n, const char *mac_hex, const uint8_t key[CXLCR_SEAL_KEY_BYTES],
			 const uint8_t nonce[CXLCR_SEAL_NONCE_BYTES])
{
	uint8_t mac[CXLCR_SEAL_MAC_BYTES];
	return hex_exact(mac_hex, mac, sizeof(mac)) == 0 &&
	       cxlcr_seal_check(mac, sizeof(mac), key, REPLY_LABEL, nonce, 0, inner, n);
}

int api_read_line(int fd, char *buf, size_t max, size_t *len, char *err, size_t errlen)
{
	size_t n = 0;
	for (;;) {
		ssize_t got = read(fd, buf + n, max + 1 - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return api_say(err, errlen, "timed out waiting for a message");
		if (got < 0)
			return api_say(err, errlen, "cannot read the message: %s", strerror(errno));
		if (got == 0) {
			if (n == 0)
				return api_say(err, errlen, "connection closed before a message");
			break; /* a last line without its '\n' */
		}
		char *nl = memchr(buf + n, '\n', (size_t)got);
		n += (size_t)got;
		if (nl) {
			n = (size_t)(nl - buf);
			break;
		}
		if (n > max)
			return api_say(err, errlen, "message longer than %zu bytes", max);
	}
	buf[n] = 0;
	*len = n;
	return 0;
}

int api_write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		/* A peer that has gone must not kill a client with SIGPIPE. */
		ssize_t w = send(fd, buf, len, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		buf += w;
		len -= (size_t)w;
	}
	return 0;
}
