/*
 * A tiny JSON writer for `--json` output: one object per command, written
 * to stdout. Keys and strings are escaped; numbers are printed as is.
 */
#ifndef CXLCR_JSON_H
#define CXLCR_JSON_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct json {
	FILE *out;
	int depth;
	bool need_comma;
};

void json_begin(struct json *j, FILE *out);          /* { */
void json_end(struct json *j);                        /* }\n */
void json_object_begin(struct json *j, const char *key);    /* "key": { (key NULL in arrays) */
void json_object_end(struct json *j);
void json_array_begin(struct json *j, const char *key);
void json_array_end(struct json *j);
void json_str(struct json *j, const char *key, const char *v);
void json_u64(struct json *j, const char *key, uint64_t v);
void json_i64(struct json *j, const char *key, int64_t v);
void json_double(struct json *j, const char *key, double v);
void json_bool(struct json *j, const char *key, bool v);
void json_null_value(struct json *j, const char *key);

/* The number after the first "key": in text (the --json output of a verb
 * run on another host, which this writer made), 0 if there is none. */
double json_find_number(const char *text, const char *key);

#endif
