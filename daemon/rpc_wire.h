/*
 * The control protocol's messages (proto/control.proto) as bytes: frames
 * (a 4-byte big-endian length, then a protobuf-c message), made and parsed
 * here and nowhere else. Everything that parses bytes from the network is
 * a function of this file taking a buffer, so that tests/ctl_fuzz.c can
 * feed each one truncated, oversized and random messages.
 */
#ifndef CXLCR_RPC_WIRE_H
#define CXLCR_RPC_WIRE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CTL_MAGIC           "CXC1"   /* the client's first 4 bytes */
#define CTL_MAGIC_LEN       4
#define CTL_VERSION         1u
#define CTL_CHALLENGE_BYTES 32u
#define CTL_KEY_BYTES       32u      /* crypto_auth_KEYBYTES, CXLCR_POD_KEY_BYTES */
#define CTL_FRAME_MAX       (128u * 1024u)  /* larger frames are refused unread */
#define CTL_CHUNK           (16u * 1024u)   /* output goes back in pieces of at most this */
#define CTL_ARGS_MAX        256u
#define CTL_ARGS_LEN_MAX    65536u   /* bytes of arguments, NULs included */
#define CTL_REFUSED_MAX     512u

/* Encoders: a whole frame (length included) in a malloc'd buffer, or NULL
 * (with cxlcr_last_error()). */
uint8_t *ctl_hello_encode(const uint8_t challenge[CTL_CHALLENGE_BYTES], size_t *len);
uint8_t *ctl_request_encode(const uint8_t challenge[CTL_CHALLENGE_BYTES], const uint8_t key[CTL_KEY_BYTES],
			    int argc, char **argv, size_t *len);
/* A frame of the daemon's into buf (of cap bytes, at least CTL_CHUNK + 64):
 * output of stream (1 or 2), or, with data NULL, the exit status, or, with
 * refused set, a refusal. No allocation (the output relay calls it while
 * the worker may fork). Returns the frame's length, 0 if it does not fit. */
size_t ctl_frame_encode(uint8_t *buf, size_t cap, int stream, const void *data, size_t n, int status,
			const char *refused);

/* Parsers of one frame's body (without its length). Each returns 0, or -1
 * with one phrase in why. */
int ctl_hello_parse(const uint8_t *buf, size_t len, uint8_t challenge[CTL_CHALLENGE_BYTES], char *why,
		    size_t why_len);
/* The request of a connection whose challenge was challenge, checked
 * against the pod's key: *argv is one allocation (free it), NULL-ended. */
int ctl_request_parse(const uint8_t *buf, size_t len, const uint8_t challenge[CTL_CHALLENGE_BYTES],
		      const uint8_t key[CTL_KEY_BYTES], int *argc, char ***argv, char *why, size_t why_len);

enum ctl_frame_kind { CTL_OUTPUT = 1, CTL_STATUS, CTL_REFUSED };
struct ctl_frame {
	enum ctl_frame_kind kind;
	int stream;                   /* CTL_OUTPUT: 1 or 2 */
	uint8_t *data;                /* CTL_OUTPUT: malloc'd, len bytes */
	size_t len;
	int status;                   /* CTL_STATUS */
	char refused[CTL_REFUSED_MAX]; /* CTL_REFUSED */
};
int ctl_frame_parse(const uint8_t *buf, size_t len, struct ctl_frame *f, char *why, size_t why_len);

/* Reads one frame's body into a malloc'd *buf by deadline (CLOCK_MONOTONIC
 * ns): -1 with errno ETIMEDOUT, EPIPE (closed) or EMSGSIZE (over
 * CTL_FRAME_MAX: nothing more is read). */
int ctl_read_frame(int fd, uint8_t **buf, size_t *len, uint64_t deadline);
int ctl_write_all(int fd, const void *p, size_t n);

#endif
