/*
 * A small, strict JSON reader for the fork API's messages (protocol.c): it
 * walks a message in place, the caller asking for what it expects next
 * (an object, a member, a string, a number...). Anything that is not JSON
 * as RFC 8259 has it is an error, with the byte offset where it was found;
 * nesting is limited, strings are copied into fixed-size buffers.
 */
#ifndef CXLCR_API_JSON_READ_H
#define CXLCR_API_JSON_READ_H
#include <stdbool.h>
#include <stddef.h>

#define JSON_READ_DEPTH 8

struct json_reader {
	const char *start, *p, *end;
	char error[96];             /* the first error, "" while there is none */
	int depth;
	bool first[JSON_READ_DEPTH]; /* no member or element read yet at this depth */
};

void jr_init(struct json_reader *r, const char *text, size_t len);

/* Each returns false (or -1) and sets r->error on malformed input. */
bool jr_object(struct json_reader *r);                     /* { */
/* The next member's key (its ':' consumed): 1; the closing '}': 0. */
int jr_member(struct json_reader *r, char *key, size_t len);
bool jr_array(struct json_reader *r);                      /* [ */
/* Another element follows: 1; the closing ']': 0. */
int jr_element(struct json_reader *r);
/* A string, unescaped into out (too long for it: an error; "\u0000" too). */
bool jr_string(struct json_reader *r, char *out, size_t len);
bool jr_number(struct json_reader *r, double *out);
bool jr_bool(struct json_reader *r, bool *out);
/* Any value, of any kind, passed over. */
bool jr_skip(struct json_reader *r);
/* Nothing but white space is left. */
bool jr_done(struct json_reader *r);

/* The kind of the next value: '"', '{', '[', 'n' (number), 't' (true or
 * false), 'z' (null), or 0 at the end or on junk. */
char jr_peek(struct json_reader *r);

#endif
