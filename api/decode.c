/*
 * Decoding of the fork API's messages (api/protocol.h), which come from the
 * network: Jansson parses them, strictly (RFC 8259, no "\u0000", no key
 * given twice), and the members are then checked one by one against what
 * each field may hold, so nothing is cast out of its range.
 */
#include <jansson.h>
#include <stdint.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/util.h"
#include "protocol.h"

enum { F_OP = 1, F_SERVICE = 2, F_HOST = 4, F_COUNT = 8, F_MODE = 16, F_FETCH = 32, F_NONCE = 64 };

/* The first problem with a request's fields, kept while reading goes on. */
__attribute__((format(printf, 3, 4)))
static int note(char *err, size_t errlen, const char *fmt, ...)
{
	if (err[0])
		return 1;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return 1;
}

/* A message parsed by Jansson, which refuses what RFC 8259 does not allow,
 * "\u0000" in strings and (JSON_REJECT_DUPLICATES) a key given twice: with
 * two "mac" or "count" members, the daemon and a proxy in front of it could each
 * believe a different one. NULL with why in err; else an object. */
static json_t *parse_object(const char *text, size_t len, char *err, size_t errlen)
{
	json_error_t e;
	json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &e);
	if (!root) {
		snprintf(err, errlen, "malformed JSON at byte %d: %s", e.position, e.text);
		return NULL;
	}
	if (!json_is_object(root)) {
		json_decref(root);
		snprintf(err, errlen, "malformed JSON at byte 0: an object expected");
		return NULL;
	}
	return root;
}

/* One member of a request, by name, into req. A value of the wrong kind,
 * length or range is noted in err (the first one is told) and the reading
 * goes on: 1 then; 0 when the value is good. */
static int request_field(const char *key, json_t *value, struct api_request *req, unsigned *seen,
			 char *err, size_t errlen)
{
	static const struct {
		const char *name;
		unsigned bit;
	} fields[] = { { "op", F_OP }, { "service", F_SERVICE }, { "host", F_HOST },
		       { "count", F_COUNT }, { "mode", F_MODE },
		       { "fetch", F_FETCH }, { "nonce", F_NONCE } };
	unsigned bit = 0;
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		if (!strcmp(key, fields[i].name))
			bit = fields[i].bit;
	if (!bit)
		return note(err, errlen, "bad request: unknown field '%.40s'", key);
	*seen |= bit;
	if (bit == F_COUNT) {
		if (!json_is_number(value))
			return note(err, errlen, "bad request: count must be a number");
		double v = json_number_value(value);
		if (!(v >= 1 && v <= CXLCR_API_MAX_CHILDREN) || v != (double)(unsigned)v)
			return note(err, errlen, "bad request: count must be an integer from 1 to %d",
				    CXLCR_API_MAX_CHILDREN);
		req->count = (unsigned)v;
		return 0;
	}
	char *out = bit == F_OP ? req->op : bit == F_SERVICE ? req->service :
		    bit == F_HOST ? req->host : bit == F_MODE ? req->mode : bit == F_FETCH ? req->fetch : req->nonce;
	size_t len = bit == F_OP ? sizeof(req->op) : bit == F_SERVICE ? sizeof(req->service) :
		     bit == F_HOST ? sizeof(req->host) : bit == F_MODE ? sizeof(req->mode) :
		     bit == F_FETCH ? sizeof(req->fetch) : sizeof(req->nonce);
	if (!json_is_string(value))
		return note(err, errlen, "bad request: %s must be a string", key);
	const char *s = json_string_value(value);
	if (json_string_length(value) >= len)
		return note(err, errlen, "bad request: %s is longer than %zu bytes", key, len - 1);
	if (bit == F_MODE && strcmp(s, "share") && strcmp(s, "copy"))
		return note(err, errlen, "bad request: mode must be \"share\" or \"copy\"");
	if (bit == F_FETCH && strcmp(s, "background") && strcmp(s, "eager") && strcmp(s, "lazy"))
		return note(err, errlen, "bad request: fetch must be \"background\", \"eager\" or \"lazy\"");
	uint8_t nonce[CXLCR_SEAL_NONCE_BYTES];
	if (bit == F_NONCE && api_nonce_parse(s, nonce) < 0)
		return note(err, errlen, "bad request: nonce must be %u hex digits", 2 * CXLCR_SEAL_NONCE_BYTES);
	strcpy(out, s);
	return 0;
}

int api_request_decode(const char *line, size_t len, struct api_request *req, char *err,
		       size_t errlen)
{
	char first[API_ERROR_MAX] = "", why[API_ERROR_MAX];
	unsigned seen = 0;
	memset(req, 0, sizeof(*req));
	json_t *root = parse_object(line, len, why, sizeof(why));
	if (!root)
		return api_say(err, errlen, "bad request: %s", why);
	const char *key;
	json_t *value;
	json_object_foreach(root, key, value)
		request_field(key, value, req, &seen, first, sizeof(first));
	json_decref(root);
	if (!(seen & F_OP))
		return api_say(err, errlen, "bad request: missing field 'op'");
	bool release = !strcmp(req->op, "release");
	if (strcmp(req->op, "fork") && !release)
		return api_say(err, errlen, "bad request: unknown op '%s' (known: fork, release)", req->op);
	if (first[0])
		return api_say(err, errlen, "%s", first);
	/* fork: service, host, count; release: the child's name, as service. */
	static const char *const names[] = { "service", "host", "count" };
	for (int i = 0; i < (release ? 1 : 3); i++)
		if (!(seen & (F_SERVICE << i)))
			return api_say(err, errlen, "bad request: missing field '%s'", names[i]);
	if (!cxlcr_valid_name(req->service))
		return api_say(err, errlen, "bad request: '%s' is not a service name", req->service);
	if (release)
		return seen & (F_HOST | F_COUNT | F_MODE | F_FETCH)
			       ? api_say(err, errlen, "bad request: release takes no host, count, mode or fetch")
			       : 0;
	if (!cxlcr_valid_name(req->host))
		return api_say(err, errlen, "bad request: '%s' is not a host name", req->host);
	return 0;
}

/* A whole number in [lo, hi]: a reply comes from the network, and casting
 * a double outside the target's range is undefined. MAX_EXACT: 2^53, the
 * largest count a double holds exactly. */
#define MAX_EXACT 9007199254740992.0
static bool reply_whole(json_t *v, double lo, double hi, double *out)
{
	if (!json_is_number(v))
		return false;
	*out = json_number_value(v);
	return *out >= lo && *out <= hi && *out == (double)(long long)*out;
}

static bool reply_number(json_t *v, double *out)
{
	if (!json_is_number(v))
		return false;
	*out = json_number_value(v);
	return true;
}

/* A string into a fixed-size field; too long for it is an error. */
static bool reply_string(json_t *v, char *out, size_t len)
{
	if (!json_is_string(v) || json_string_length(v) >= len)
		return false;
	memcpy(out, json_string_value(v), json_string_length(v) + 1);
	return true;
}

/* One child object of a reply's "children"; unknown members are skipped. */
static bool reply_child(json_t *o, struct cxlcr_fork_child *c)
{
	const char *key;
	json_t *v;
	double d;
	if (!json_is_object(o))
		return false;
	json_object_foreach(o, key, v) {
		bool ok = true;
		if (!strcmp(key, "name"))
			ok = reply_string(v, c->name, sizeof(c->name));
		else if (!strcmp(key, "host"))
			ok = reply_string(v, c->host, sizeof(c->host));
		else if (!strcmp(key, "address"))
			ok = reply_string(v, c->address, sizeof(c->address));
		else if (!strcmp(key, "pid"))
			ok = reply_whole(v, 1, INT_MAX, &d) && (c->pid = (int)d, true);
		else if (!strcmp(key, "restore_ms"))
			ok = reply_number(v, &c->restore_ms);
		else if (!strcmp(key, "prefetched_pages"))
			ok = reply_whole(v, 0, MAX_EXACT, &d) && (c->prefetched_pages = (unsigned long long)d, true);
		if (!ok)
			return false;
	}
	return true;
}

/* The "children" array of a reply into res; why it is bad in why. */
static bool reply_children(json_t *a, struct cxlcr_fork_result *res, char *why, size_t len)
{
	size_t i;
	json_t *c;
	if (!json_is_array(a))
		return false;
	if (json_array_size(a) > CXLCR_API_MAX_CHILDREN) {
		snprintf(why, len, "more than %d children", CXLCR_API_MAX_CHILDREN);
		return false;
	}
	json_array_foreach(a, i, c) {
		if (!reply_child(c, &res->child[i]))
			return false;
		res->count = (unsigned)i + 1;
	}
	return true;
}

/* One member of a reply (but "ok" and "error"); unknown ones are skipped,
 * for the daemons of later versions. */
static bool reply_member(const char *key, json_t *v, struct cxlcr_fork_result *res, char *why,
			 size_t len)
{
	double d = 0;
	if (!strcmp(key, "children"))
		return reply_children(v, res, why, len);
	if (!strcmp(key, "freeze_ms"))
		return reply_number(v, &res->freeze_ms);
	if (!strcmp(key, "snapshot_ms"))
		return reply_number(v, &res->snapshot_ms);
	if (!strcmp(key, "restore_ms"))
		return reply_number(v, &res->restore_ms);
	if (!strcmp(key, "total_ms"))
		return reply_number(v, &res->total_ms);
	if (!strcmp(key, "image_bytes"))
		return reply_whole(v, 0, MAX_EXACT, &d) && (res->image_bytes = (uint64_t)d, true);
	if (!strcmp(key, "snapshot_bytes"))
		return reply_whole(v, 0, MAX_EXACT, &d) && (res->snapshot_bytes = (uint64_t)d, true);
	if (!strcmp(key, "mode"))
		return reply_string(v, res->mode, sizeof(res->mode));
	return true;
}

int api_reply_decode(const char *line, size_t len, struct cxlcr_fork_result *res, char *err,
		     size_t errlen)
{
	char why[API_ERROR_MAX] = "", error[API_ERROR_MAX] = "";
	bool ok = false, have_ok = false, have_error = false;
	memset(res, 0, sizeof(*res));
	json_t *root = parse_object(line, len, why, sizeof(why));
	if (!root)
		goto malformed;
	const char *key;
	json_t *v;
	json_object_foreach(root, key, v) {
		bool good;
		if (!strcmp(key, "ok"))
			good = have_ok = json_is_boolean(v) && ((ok = json_is_true(v)), true);
		else if (!strcmp(key, "error"))
			good = have_error = reply_string(v, error, sizeof(error));
		else
			good = reply_member(key, v, res, why, sizeof(why));
		if (!good) {
			if (!why[0])
				snprintf(why, sizeof(why), "bad value of '%.40s'", key);
			json_decref(root);
			goto malformed;
		}
	}
	json_decref(root);
	if (!have_ok) {
		snprintf(why, sizeof(why), "no \"ok\" member");
		goto malformed;
	}
	if (!ok)
		return api_say(err, errlen, "%s", have_error && error[0] ? error : "the daemon gave no reason");
	return 0;
malformed:
	memset(res, 0, sizeof(*res));
	return api_say(err, errlen, "malformed reply from the daemon (%s)", why);
}


/* A sealed line's two members, the line and its MAC, from an object of
 * those two alone: false if root is not such an envelope. */
static bool envelope(json_t *root, const char **inner, size_t *n, const char **mac)
{
	json_t *sealed = json_object_get(root, "sealed"), *m = json_object_get(root, "mac");
	if (json_object_size(root) != 2 || !json_is_string(sealed) || !json_is_string(m))
		return false;
	*inner = json_string_value(sealed);
	*n = json_string_length(sealed);
	*mac = json_string_value(m);
	return true;
}

int api_greeting_decode(const char *line, size_t len, uint8_t challenge[CXLCR_SEAL_NONCE_BYTES], char *err,
			size_t errlen)
{
	char why[API_ERROR_MAX];
	json_t *root = parse_object(line, len, why, sizeof(why));
	if (!root)
		return api_say(err, errlen, "malformed greeting from the daemon (%s)", why);
	json_t *c = json_object_get(root, "challenge");
	int rc;
	if (json_object_size(root) == 1 && json_is_string(c) && api_nonce_parse(json_string_value(c), challenge) == 0) {
		rc = 0;
	} else if (json_object_get(root, "ok")) { /* a refusal instead (busy) */
		struct cxlcr_fork_result none;
		rc = api_reply_decode(line, len, &none, err, errlen);
		if (rc == 0)
			rc = api_say(err, errlen, "malformed greeting from the daemon (a success before any request)");
	} else {
		rc = api_say(err, errlen, "malformed greeting from the daemon (a greeting has one \"challenge\" of %u "
					  "hex digits)", 2 * CXLCR_SEAL_NONCE_BYTES);
	}
	json_decref(root);
	return rc;
}

int api_request_open(const char *line, size_t len, const uint8_t *key,
		     const uint8_t challenge[CXLCR_SEAL_NONCE_BYTES], struct api_request *req, char *err,
		     size_t errlen, char *why, size_t whylen)
{
	char bad[API_ERROR_MAX];
	const char *inner, *mac;
	size_t n;
	memset(req, 0, sizeof(*req));
	json_t *root = parse_object(line, len, bad, sizeof(bad));
	if (!root) {
		snprintf(why, whylen, "bad request: %s", bad);
		return api_say(err, errlen, "bad request: %s", bad);
	}
	int rc = -1;
	if (!json_object_get(root, "sealed")) {
		snprintf(why, whylen, "not authorised (not sealed)");
		api_say(err, errlen, API_NOT_AUTHORISED);
	} else if (!envelope(root, &inner, &n, &mac)) {
		snprintf(why, whylen, "not authorised (not sealed: an envelope has \"sealed\" and \"mac\" strings, "
				      "nothing else)");
		api_say(err, errlen, API_NOT_AUTHORISED);
	} else if (!key || !api_request_sealed_by(inner, n, mac, key, challenge)) {
		snprintf(why, whylen, "not authorised (its MAC does not check: a wrong token, or replayed)");
		api_say(err, errlen, API_NOT_AUTHORISED);
	} else if ((rc = api_request_decode(inner, n, req, err, errlen)) < 0) {
		snprintf(why, whylen, "%s", err);
	}
	json_decref(root);
	return rc;
}

int api_reply_open(const char *line, size_t len, const uint8_t *key, const uint8_t nonce[CXLCR_SEAL_NONCE_BYTES],
		   struct cxlcr_fork_result *res, char *err, size_t errlen)
{
	char why[API_ERROR_MAX];
	const char *inner, *mac;
	size_t n;
	memset(res, 0, sizeof(*res));
	json_t *root = parse_object(line, len, why, sizeof(why));
	if (!root)
		return api_say(err, errlen, "malformed reply from the daemon (%s)", why);
	if (json_object_get(root, "sealed")) {
		int rc;
		if (!envelope(root, &inner, &n, &mac))
			rc = api_say(err, errlen, "malformed reply from the daemon (a sealed reply has \"sealed\" "
						  "and \"mac\" strings, nothing else)");
		else if (!key || !api_reply_sealed_by(inner, n, mac, key, nonce))
			rc = api_say(err, errlen, "%s", API_REPLY_FORGED);
		else
			rc = api_reply_decode(inner, n, res, err, errlen);
		json_decref(root);
		return rc;
	}
	json_decref(root);
	/* Unsealed: a refusal, which can do no more than a cut connection;
	 * anything else is not the daemon's for this request. */
	if (api_reply_decode(line, len, res, err, errlen) < 0)
		return -1;
	memset(res, 0, sizeof(*res));
	return api_say(err, errlen, "%s", API_REPLY_FORGED);
}
