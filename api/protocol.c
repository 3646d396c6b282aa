#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/util.h"
#include "../daemon/json.h"
#include "json_read.h"
#include "protocol.h"

__attribute__((format(printf, 3, 4)))
static int say(char *err, size_t errlen, const char *fmt, ...)
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
	}
	if (req->token[0])
		json_str(&l.j, "token", req->token);
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

enum { F_OP = 1, F_SERVICE = 2, F_HOST = 4, F_COUNT = 8, F_TOKEN = 16 };

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

/* One member of a request, by name, into req. A value of the wrong kind,
 * length or range is noted in err and the reading goes on (so that the
 * token is read all the same): 1 then; -1 on malformed JSON (r->error);
 * 0 when the value is good. */
static int request_field(struct json_reader *r, const char *key, struct api_request *req,
			 unsigned *seen, char *err, size_t errlen)
{
	static const struct {
		const char *name;
		unsigned bit;
	} fields[] = { { "op", F_OP }, { "service", F_SERVICE }, { "host", F_HOST },
		       { "count", F_COUNT }, { "token", F_TOKEN } };
	unsigned bit = 0;
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		if (!strcmp(key, fields[i].name))
			bit = fields[i].bit;
	if (!bit || (*seen & bit)) {
		if (!jr_skip(r))
			return -1;
		if (!bit)
			return note(err, errlen, "bad request: unknown field '%.40s'", key);
		return note(err, errlen, "bad request: field '%s' given twice", key);
	}
	*seen |= bit;
	if (bit == F_COUNT) {
		double v;
		if (jr_peek(r) != 'n')
			return jr_skip(r) ? note(err, errlen, "bad request: count must be a number") : -1;
		if (!jr_number(r, &v))
			return -1;
		if (!(v >= 1 && v <= CXLCR_API_MAX_CHILDREN) || v != (double)(unsigned)v)
			return note(err, errlen, "bad request: count must be an integer from 1 to %d",
				    CXLCR_API_MAX_CHILDREN);
		req->count = (unsigned)v;
		return 0;
	}
	char *out = bit == F_OP ? req->op : bit == F_SERVICE ? req->service :
		    bit == F_HOST ? req->host : req->token;
	size_t len = bit == F_OP ? sizeof(req->op) : bit == F_SERVICE ? sizeof(req->service) :
		     bit == F_HOST ? sizeof(req->host) : sizeof(req->token);
	char value[API_REQUEST_MAX + 1]; /* any string of a request fits */
	if (jr_peek(r) != '"')
		return jr_skip(r) ? note(err, errlen, "bad request: %s must be a string", key) : -1;
	if (!jr_string(r, value, sizeof(value)))
		return -1;
	if (strlen(value) >= len)
		return note(err, errlen, "bad request: %s is longer than %zu bytes", key, len - 1);
	strcpy(out, value);
	return 0;
}

int api_request_decode(const char *line, size_t len, struct api_request *req, char *err,
		       size_t errlen)
{
	struct json_reader r;
	char key[64], first[API_ERROR_MAX] = "";
	unsigned seen = 0;
	int more;
	memset(req, 0, sizeof(*req));
	jr_init(&r, line, len);
	if (!jr_object(&r))
		return say(err, errlen, "bad request: %s", r.error);
	while ((more = jr_member(&r, key, sizeof(key))) > 0) {
		if (request_field(&r, key, req, &seen, first, sizeof(first)) < 0)
			return say(err, errlen, "bad request: %s", r.error);
	}
	if (more < 0 || !jr_done(&r))
		return say(err, errlen, "bad request: %s", r.error);
	req->readable = true;
	if (!(seen & F_OP))
		return say(err, errlen, "bad request: missing field 'op'");
	bool release = !strcmp(req->op, "release");
	if (strcmp(req->op, "fork") && !release)
		return say(err, errlen, "bad request: unknown op '%s' (known: fork, release)", req->op);
	if (first[0])
		return say(err, errlen, "%s", first);
	/* fork: service, host, count; release: the child's name, as service. */
	static const char *const names[] = { "service", "host", "count" };
	for (int i = 0; i < (release ? 1 : 3); i++)
		if (!(seen & (F_SERVICE << i)))
			return say(err, errlen, "bad request: missing field '%s'", names[i]);
	if (!cxlcr_valid_name(req->service))
		return say(err, errlen, "bad request: '%s' is not a service name", req->service);
	if (release)
		return seen & (F_HOST | F_COUNT) ? say(err, errlen, "bad request: release takes no host or count") : 0;
	if (!cxlcr_valid_name(req->host))
		return say(err, errlen, "bad request: '%s' is not a host name", req->host);
	return 0;
}

/* A number into a double field; any other kind of value is an error. */
static bool reply_number(struct json_reader *r, double *out)
{
	return jr_peek(r) == 'n' ? jr_number(r, out) : (jr_skip(r), false);
}

/* A whole number in [lo, hi]: a reply comes from the network, and casting
 * a double outside the target's range is undefined. MAX_EXACT: 2^53, the
 * largest count a double holds exactly. */
#define MAX_EXACT 9007199254740992.0
static bool reply_whole(struct json_reader *r, double lo, double hi, double *out)
{
	return reply_number(r, out) && *out >= lo && *out <= hi && *out == (double)(long long)*out;
}

static bool reply_string(struct json_reader *r, char *out, size_t len)
{
	return jr_peek(r) == '"' && jr_string(r, out, len);
}

/* One child object of a reply's "children"; unknown members are skipped. */
static bool reply_child(struct json_reader *r, struct cxlcr_fork_child *c)
{
	char key[64];
	double v;
	int more;
	if (!jr_object(r))
		return false;
	while ((more = jr_member(r, key, sizeof(key))) > 0) {
		bool ok;
		if (!strcmp(key, "name"))
			ok = reply_string(r, c->name, sizeof(c->name));
		else if (!strcmp(key, "host"))
			ok = reply_string(r, c->host, sizeof(c->host));
		else if (!strcmp(key, "address"))
			ok = reply_string(r, c->address, sizeof(c->address));
		else if (!strcmp(key, "pid"))
			ok = reply_whole(r, 1, INT_MAX, &v) && (c->pid = (int)v, true);
		else if (!strcmp(key, "restore_ms"))
			ok = reply_number(r, &c->restore_ms);
		else if (!strcmp(key, "prefetched_pages"))
			ok = reply_whole(r, 0, MAX_EXACT, &v) && (c->prefetched_pages = (unsigned long long)v, true);
		else
			ok = jr_skip(r);
		if (!ok)
			return false;
	}
	return more == 0;
}

int api_reply_decode(const char *line, size_t len, struct cxlcr_fork_result *res, char *err,
		     size_t errlen)
{
	struct json_reader r;
	char key[64], error[API_ERROR_MAX] = "";
	bool ok = false, have_ok = false, have_error = false;
	int more;
	memset(res, 0, sizeof(*res));
	jr_init(&r, line, len);
	if (!jr_object(&r))
		goto malformed;
	while ((more = jr_member(&r, key, sizeof(key))) > 0) {
		double v = 0;
		bool good = true;
		if (!strcmp(key, "ok")) {
			good = have_ok = jr_bool(&r, &ok);
		} else if (!strcmp(key, "error")) {
			good = have_error = reply_string(&r, error, sizeof(error));
		} else if (!strcmp(key, "children")) {
			int next = -1;
			if (!jr_array(&r))
				goto malformed;
			while (good && (next = jr_element(&r)) > 0) {
				if (res->count >= CXLCR_API_MAX_CHILDREN) {
					snprintf(r.error, sizeof(r.error), "more than %d children",
						 CXLCR_API_MAX_CHILDREN);
					goto malformed;
				}
				good = reply_child(&r, &res->child[res->count++]);
			}
			good = good && next == 0;
		} else if (!strcmp(key, "freeze_ms")) {
			good = reply_number(&r, &res->freeze_ms);
		} else if (!strcmp(key, "snapshot_ms")) {
			good = reply_number(&r, &res->snapshot_ms);
		} else if (!strcmp(key, "restore_ms")) {
			good = reply_number(&r, &res->restore_ms);
		} else if (!strcmp(key, "total_ms")) {
			good = reply_number(&r, &res->total_ms);
		} else if (!strcmp(key, "image_bytes")) {
			good = reply_whole(&r, 0, MAX_EXACT, &v);
			res->image_bytes = good ? (uint64_t)v : 0;
		} else if (!strcmp(key, "snapshot_bytes")) {
			good = reply_whole(&r, 0, MAX_EXACT, &v);
			res->snapshot_bytes = good ? (uint64_t)v : 0;
		} else {
			good = jr_skip(&r);
		}
		if (!good) {
			if (!r.error[0])
				snprintf(r.error, sizeof(r.error), "bad value of '%.40s'", key);
			goto malformed;
		}
	}
	if (more < 0 || !jr_done(&r))
		goto malformed;
	if (!have_ok) {
		snprintf(r.error, sizeof(r.error), "no \"ok\" member");
		goto malformed;
	}
	if (!ok)
		return say(err, errlen, "%s", have_error && error[0] ? error : "the daemon gave no reason");
	return 0;
malformed:
	memset(res, 0, sizeof(*res));
	return say(err, errlen, "malformed reply from the daemon (%s)", r.error);
}

int api_read_line(int fd, char *buf, size_t max, size_t *len, char *err, size_t errlen)
{
	size_t n = 0;
	for (;;) {
		ssize_t got = read(fd, buf + n, max + 1 - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return say(err, errlen, "timed out waiting for a message");
		if (got < 0)
			return say(err, errlen, "cannot read the message: %s", strerror(errno));
		if (got == 0) {
			if (n == 0)
				return say(err, errlen, "connection closed before a message");
			break; /* a last line without its '\n' */
		}
		char *nl = memchr(buf + n, '\n', (size_t)got);
		n += (size_t)got;
		if (nl) {
			n = (size_t)(nl - buf);
			break;
		}
		if (n > max)
			return say(err, errlen, "message longer than %zu bytes", max);
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
