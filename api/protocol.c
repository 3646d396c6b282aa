#include <errno.h>
#include <jansson.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/util.h"
#include "protocol.h"

int api_say(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

/* A JSON string of s, its bytes that are not UTF-8 as U+FFFD (Jansson
 * takes UTF-8 only, and a name or an error can carry what a client sent). */
static json_t *text(const char *s)
{
	json_t *v = json_string(s);
	if (v || !s)
		return v;
	size_t n = strlen(s), at = 0;
	char *clean = malloc(3 * n + 1);
	if (!clean)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		int len = c < 0x80 ? 1 : cxlcr_utf8_length((const unsigned char *)s + i);
		if (len) {
			memcpy(clean + at, s + i, (size_t)len);
			at += (size_t)len;
			i += (size_t)len - 1;
		} else {
			memcpy(clean + at, "\xef\xbf\xbd", 3);
			at += 3;
		}
	}
	clean[at] = 0;
	v = json_string(clean);
	free(clean);
	return v;
}

/* o (whose reference is taken) as one compact line ending in '\n'; NULL
 * when o is NULL (a member that could not be made) or out of memory. */
static char *line_of(json_t *o, size_t *len)
{
	char *s = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
	json_decref(o);
	if (!s)
		return NULL;
	size_t n = strlen(s);
	char *line = realloc(s, n + 2);
	if (!line) {
		free(s);
		return NULL;
	}
	line[n] = '\n';
	line[n + 1] = 0;
	*len = n + 1;
	return line;
}

/* Sets o[key] to v, which it takes; false (o released) if either is NULL
 * or the set fails. */
static bool put(json_t *o, const char *key, json_t *v)
{
	return o && v && json_object_set_new(o, key, v) == 0;
}

char *api_request_encode(const struct api_request *req, size_t *len)
{
	json_t *o = json_object();
	bool ok = put(o, "op", text(req->op)) && put(o, "service", text(req->service));
	if (ok && strcmp(req->op, "release")) {
		ok = put(o, "host", text(req->host)) && put(o, "count", json_integer(req->count));
		if (ok && req->mode[0])
			ok = put(o, "mode", text(req->mode));
		if (ok && req->fetch[0])
			ok = put(o, "fetch", text(req->fetch));
	}
	if (ok && req->nonce[0])
		ok = put(o, "nonce", text(req->nonce));
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return line_of(o, len);
}

static json_t *child_of(const struct cxlcr_fork_child *c)
{
	json_t *o = json_object();
	if (put(o, "name", text(c->name)) && put(o, "host", text(c->host)) && put(o, "address", text(c->address)) &&
	    put(o, "pid", json_integer(c->pid)) && put(o, "restore_ms", json_real(c->restore_ms)) &&
	    put(o, "prefetched_pages", json_integer((json_int_t)c->prefetched_pages)))
		return o;
	json_decref(o);
	return NULL;
}

char *api_reply_encode(const struct cxlcr_fork_result *res, size_t *len)
{
	json_t *o = json_object(), *children = json_array();
	bool ok = put(o, "ok", json_true()) && children;
	for (unsigned i = 0; ok && i < res->count && i < CXLCR_API_MAX_CHILDREN; i++)
		ok = json_array_append_new(children, child_of(&res->child[i])) == 0;
	ok = ok && put(o, "children", children);
	if (!ok)
		json_decref(children);
	children = NULL;
	ok = ok && put(o, "freeze_ms", json_real(res->freeze_ms)) && put(o, "snapshot_ms", json_real(res->snapshot_ms)) &&
	     put(o, "restore_ms", json_real(res->restore_ms)) && put(o, "total_ms", json_real(res->total_ms)) &&
	     put(o, "image_bytes", json_integer((json_int_t)res->image_bytes)) &&
	     put(o, "snapshot_bytes", json_integer((json_int_t)res->snapshot_bytes));
	if (ok && res->mode[0])
		ok = put(o, "mode", text(res->mode));
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return line_of(o, len);
}

char *api_error_encode(const char *error, size_t *len)
{
	json_t *o = json_object();
	/* One line: the encoder escapes newlines, but an error is one anyway. */
	char one[API_ERROR_MAX];
	snprintf(one, sizeof(one), "%s", error && *error ? error : "unknown error");
	one[strcspn(one, "\n")] = 0;
	if (!put(o, "ok", json_false()) || !put(o, "error", text(one))) {
		json_decref(o);
		return NULL;
	}
	return line_of(o, len);
}

/* What the API key is derived for (BLAKE2b keyed with the token's bytes):
 * the key MACs requests and replies, and never travels, nor does the
 * token. The labels of the MACs set them apart from each other and from
 * the control protocol's (common/seal.h). */
#define KEY_LABEL     "cxlcr fork API reply key, version 1"
#define REPLY_LABEL   "cxlcr fork API reply"
#define REQUEST_LABEL "cxlcr fork API request"

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

int api_mac_key(const char *token, uint8_t key[CXLCR_SEAL_KEY_BYTES])
{
	uint8_t raw[CXLCR_API_TOKEN_LEN / 2];
	if (sodium_init() < 0 || hex_exact(token, raw, sizeof(raw)) < 0)
		return -1;
	crypto_generichash(key, CXLCR_SEAL_KEY_BYTES, (const unsigned char *)KEY_LABEL, strlen(KEY_LABEL), raw,
			   sizeof(raw));
	sodium_memzero(raw, sizeof(raw));
	return 0;
}

int api_nonce_parse(const char *hex, uint8_t nonce[CXLCR_SEAL_NONCE_BYTES])
{
	return hex_exact(hex, nonce, CXLCR_SEAL_NONCE_BYTES);
}

char *api_greeting_encode(const uint8_t challenge[CXLCR_SEAL_NONCE_BYTES], size_t *len)
{
	char hex[2 * CXLCR_SEAL_NONCE_BYTES + 1];
	sodium_bin2hex(hex, sizeof(hex), challenge, CXLCR_SEAL_NONCE_BYTES);
	json_t *o = json_object();
	if (!put(o, "challenge", json_string(hex))) {
		json_decref(o);
		return NULL;
	}
	return line_of(o, len);
}

/* line (len bytes, up to its '\n') wrapped with its MAC under key over
 * label and nonce. */
static char *seal_line(const char *line, size_t len, const char *label, const uint8_t key[CXLCR_SEAL_KEY_BYTES],
		       const uint8_t nonce[CXLCR_SEAL_NONCE_BYTES], size_t *out_len)
{
	uint8_t mac[CXLCR_SEAL_MAC_BYTES];
	char hex[2 * CXLCR_SEAL_MAC_BYTES + 1], *inner = strndup(line, len);
	if (!inner)
		return NULL;
	inner[strcspn(inner, "\n")] = 0;
	cxlcr_seal_mac(mac, key, label, nonce, 0, inner, strlen(inner));
	sodium_bin2hex(hex, sizeof(hex), mac, sizeof(mac));
	json_t *o = json_object();
	bool ok = put(o, "sealed", text(inner)) && put(o, "mac", json_string(hex));
	free(inner);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return line_of(o, out_len);
}

char *api_request_seal(const char *request, size_t len, const uint8_t key[CXLCR_SEAL_KEY_BYTES],
		       const uint8_t challenge[CXLCR_SEAL_NONCE_BYTES], size_t *out_len)
{
	return seal_line(request, len, REQUEST_LABEL, key, challenge, out_len);
}

char *api_reply_seal(const char *reply, size_t len, const uint8_t key[CXLCR_SEAL_KEY_BYTES],
		     const uint8_t nonce[CXLCR_SEAL_NONCE_BYTES], size_t *out_len)
{
	return seal_line(reply, len, REPLY_LABEL, key, nonce, out_len);
}

/* Whether mac_hex is the MAC of line inner (n bytes) under key over label
 * and nonce. */
static bool api_sealed_by(const char *inner, size_t n, const char *mac_hex, const char *label,
		   const uint8_t key[CXLCR_SEAL_KEY_BYTES], const uint8_t nonce[CXLCR_SEAL_NONCE_BYTES])
{
	uint8_t mac[CXLCR_SEAL_MAC_BYTES];
	return hex_exact(mac_hex, mac, sizeof(mac)) == 0 &&
	       cxlcr_seal_check(mac, sizeof(mac), key, label, nonce, 0, inner, n);
}

bool api_reply_sealed_by(const char *inner, size_t n, const char *mac_hex, const uint8_t key[CXLCR_SEAL_KEY_BYTES],
			 const uint8_t nonce[CXLCR_SEAL_NONCE_BYTES])
{
	return api_sealed_by(inner, n, mac_hex, REPLY_LABEL, key, nonce);
}

bool api_request_sealed_by(const char *inner, size_t n, const char *mac_hex, const uint8_t key[CXLCR_SEAL_KEY_BYTES],
			   const uint8_t challenge[CXLCR_SEAL_NONCE_BYTES])
{
	return api_sealed_by(inner, n, mac_hex, REQUEST_LABEL, key, challenge);
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
