#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_read.h"

__attribute__((format(printf, 2, 3)))
static bool fail(struct json_reader *r, const char *fmt, ...)
{
	if (r->error[0])
		return false; /* the first error is the one worth reporting */
	char what[64];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(r->error, sizeof(r->error), "malformed JSON at byte %td: %s", r->p - r->start, what);
	return false;
}

static void skip_space(struct json_reader *r)
{
	while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
		r->p++;
}

/* Consumes c after white space. */
static bool expect(struct json_reader *r, char c)
{
	skip_space(r);
	if (r->p >= r->end)
		return fail(r, "'%c' expected, message ends", c);
	if (*r->p != c)
		return fail(r, "'%c' expected", c);
	r->p++;
	return true;
}

void jr_init(struct json_reader *r, const char *text, size_t len)
{
	memset(r, 0, sizeof(*r));
	r->start = r->p = text;
	r->end = text + len;
}

char jr_peek(struct json_reader *r)
{
	skip_space(r);
	if (r->p >= r->end)
		return 0;
	switch (*r->p) {
	case '"': case '{': case '[': return *r->p;
	case 't': case 'f': return 't';
	case 'n': return 'z';
	case '-': return 'n';
	default: return *r->p >= '0' && *r->p <= '9' ? 'n' : 0;
	}
}

static bool open_nested(struct json_reader *r, char c)
{
	if (r->error[0] || !expect(r, c))
		return false;
	if (r->depth >= JSON_READ_DEPTH)
		return fail(r, "nested too deep");
	r->first[r->depth++] = true;
	return true;
}

bool jr_object(struct json_reader *r) { return open_nested(r, '{'); }
bool jr_array(struct json_reader *r) { return open_nested(r, '['); }

/* After '{' or '[': either the closing bracket, or the next item, with a
 * comma between items (and none after the last). 1: an item follows. */
static int next_item(struct json_reader *r, char close)
{
	if (r->error[0] || r->depth == 0)
		return -1;
	skip_space(r);
	if (r->p >= r->end)
		return fail(r, "'%c' expected, message ends", close), -1;
	bool *first = &r->first[r->depth - 1];
	if (*r->p == close) {
		r->p++;
		r->depth--;
		return 0;
	}
	if (!*first && !expect(r, ','))
		return -1;
	*first = false;
	return 1;
}

int jr_member(struct json_reader *r, char *key, size_t len)
{
	int more = next_item(r, '}');
	if (more <= 0)
		return more;
	if (jr_peek(r) != '"')
		return fail(r, "a member name expected"), -1;
	if (!jr_string(r, key, len) || !expect(r, ':'))
		return -1;
	return 1;
}

int jr_element(struct json_reader *r)
{
	return next_item(r, ']');
}

static int hex4(const char *p)
{
	int v = 0;
	for (int i = 0; i < 4; i++) {
		char c = p[i];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return -1;
	}
	return v;
}

/* A \uXXXX escape (a surrogate pair takes two) as UTF-8 into out. */
static int unicode_escape(struct json_reader *r, char *out)
{
	if (r->end - r->p < 5 || hex4(r->p + 1) < 0)
		return fail(r, "bad \\u escape"), -1;
	uint32_t cp = (uint32_t)hex4(r->p + 1);
	r->p += 5;
	if (cp >= 0xd800 && cp <= 0xdbff) {
		int lo = r->end - r->p >= 6 && r->p[0] == '\\' && r->p[1] == 'u' ? hex4(r->p + 2) : -1;
		if (lo < 0xdc00 || lo > 0xdfff)
			return fail(r, "unpaired surrogate"), -1;
		cp = 0x10000 + ((cp - 0xd800) << 10) + ((uint32_t)lo - 0xdc00);
		r->p += 6;
	} else if (cp >= 0xdc00 && cp <= 0xdfff) {
		return fail(r, "unpaired surrogate"), -1;
	}
	if (cp == 0)
		return fail(r, "\\u0000 in a string"), -1;
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

bool jr_string(struct json_reader *r, char *out, size_t len)
{
	if (r->error[0] || !expect(r, '"'))
		return false;
	size_t n = 0;
	for (;;) {
		if (r->p >= r->end)
			return fail(r, "unterminated string");
		unsigned char c = (unsigned char)*r->p;
		char buf[4];
		int k = 1;
		if (c == '"') {
			r->p++;
			break;
		}
		if (c < 0x20)
			return fail(r, "control character in a string");
		if (c != '\\') {
			buf[0] = (char)c;
			r->p++;
		} else if (r->p + 1 >= r->end) {
			return fail(r, "unterminated string");
		} else {
			const char *esc = strchr("\"\\/bfnrtu", r->p[1]);
			if (!esc || !r->p[1])
				return fail(r, "bad escape in a string");
			if (r->p[1] == 'u') {
				r->p++;
				if ((k = unicode_escape(r, buf)) < 0)
					return false;
			} else {
				buf[0] = "\"\\/\b\f\n\r\t"[esc - "\"\\/bfnrtu"];
				r->p += 2;
			}
		}
		if (n + (size_t)k >= len)
			return fail(r, "string longer than %zu bytes", len ? len - 1 : 0);
		memcpy(out + n, buf, (size_t)k);
		n += (size_t)k;
	}
	out[n] = 0;
	return true;
}

static bool is_digit(const struct json_reader *r)
{
	return r->p < r->end && *r->p >= '0' && *r->p <= '9';
}

/* The number's text is checked against JSON's grammar before strtod(),
 * which would take hex, "inf", leading '+' and more. */
bool jr_number(struct json_reader *r, double *out)
{
	if (r->error[0])
		return false;
	skip_space(r);
	const char *s = r->p;
	if (r->p < r->end && *r->p == '-')
		r->p++;
	if (!is_digit(r))
		return fail(r, "a number expected");
	if (*r->p == '0')
		r->p++;
	else
		while (is_digit(r))
			r->p++;
	if (r->p < r->end && *r->p == '.') {
		r->p++;
		if (!is_digit(r))
			return fail(r, "digits expected after '.'");
		while (is_digit(r))
			r->p++;
	}
	if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
		r->p++;
		if (r->p < r->end && (*r->p == '+' || *r->p == '-'))
			r->p++;
		if (!is_digit(r))
			return fail(r, "digits expected in an exponent");
		while (is_digit(r))
			r->p++;
	}
	char text[64];
	if ((size_t)(r->p - s) >= sizeof(text))
		return fail(r, "number too long");
	memcpy(text, s, (size_t)(r->p - s));
	text[r->p - s] = 0;
	*out = strtod(text, NULL);
	return true;
}

static bool literal(struct json_reader *r, const char *word)
{
	size_t n = strlen(word);
	if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n))
		return fail(r, "unknown literal");
	r->p += n;
	return true;
}

bool jr_bool(struct json_reader *r, bool *out)
{
	if (jr_peek(r) != 't')
		return fail(r, "true or false expected");
	*out = *r->p == 't';
	return literal(r, *out ? "true" : "false");
}

bool jr_skip(struct json_reader *r)
{
	char scratch[4096];
	double d;
	bool b;
	int more;
	switch (jr_peek(r)) {
	case '"': return jr_string(r, scratch, sizeof(scratch));
	case 'n': return jr_number(r, &d);
	case 't': return jr_bool(r, &b);
	case 'z': return literal(r, "null");
	case '{':
		if (!jr_object(r))
			return false;
		while ((more = jr_member(r, scratch, sizeof(scratch))) > 0)
			if (!jr_skip(r))
				return false;
		return more == 0;
	case '[':
		if (!jr_array(r))
			return false;
		while ((more = jr_element(r)) > 0)
			if (!jr_skip(r))
				return false;
		return more == 0;
	default: return fail(r, r->p >= r->end ? "a value expected, message ends" : "a value expected");
	}
}

bool jr_done(struct json_reader *r)
{
	if (r->error[0])
		return false;
	skip_space(r);
	return r->p == r->end || fail(r, "junk after the message");
}
