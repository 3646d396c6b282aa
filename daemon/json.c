#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "../common/util.h"
#include "json.h"

/* A JSON string. Bytes that are not UTF-8 (a service name or an error
 * message can carry what a client sent) become U+FFFD, so that the output
 * is always valid JSON. */
static void put_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c >= 0x80) {
			int n = cxlcr_utf8_length((const unsigned char *)s);
			if (n) {
				fwrite(s, 1, (size_t)n, f);
				s += n - 1;
			} else {
				fputs("\\ufffd", f);
			}
			continue;
		}
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c == '\t')
			fputs("\\t", f);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* Comma and key before every value. */
static void member(struct json *j, const char *key)
{
	if (j->need_comma)
		fputs(", ", j->out);
	if (key) {
		put_string(j->out, key);
		fputs(": ", j->out);
	}
	j->need_comma = true;
}

void json_begin(struct json *j, FILE *out)
{
	j->out = out;
	j->depth = 1;
	j->need_comma = false;
	fputc('{', out);
}

void json_end(struct json *j)
{
	fputs("}\n", j->out);
	fflush(j->out);
}

void json_object_begin(struct json *j, const char *key)
{
	member(j, key);
	fputc('{', j->out);
	j->need_comma = false;
}

void json_object_end(struct json *j)
{
	fputc('}', j->out);
	j->need_comma = true;
}

void json_array_begin(struct json *j, const char *key)
{
	member(j, key);
	fputc('[', j->out);
	j->need_comma = false;
}

void json_array_end(struct json *j)
{
	fputc(']', j->out);
	j->need_comma = true;
}

void json_str(struct json *j, const char *key, const char *v)
{
	member(j, key);
	put_string(j->out, v);
}

void json_u64(struct json *j, const char *key, uint64_t v)
{
	member(j, key);
	fprintf(j->out, "%" PRIu64, v);
}

void json_i64(struct json *j, const char *key, int64_t v)
{
	member(j, key);
	fprintf(j->out, "%" PRId64, v);
}

void json_double(struct json *j, const char *key, double v)
{
	member(j, key);
	fprintf(j->out, "%.3f", v);
}

void json_bool(struct json *j, const char *key, bool v)
{
	member(j, key);
	fputs(v ? "true" : "false", j->out);
}

void json_null_value(struct json *j, const char *key)
{
	member(j, key);
	fputs("null", j->out);
}

double json_find_number(const char *text, const char *key)
{
	char pattern[64];
	snprintf(pattern, sizeof(pattern), "\"%s\":", key);
	const char *at = strstr(text, pattern);
	return at ? strtod(at + strlen(pattern), NULL) : 0;
}
