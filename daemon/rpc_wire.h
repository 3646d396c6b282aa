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
#define CTL_VERSION         2u       /* 2: answers carry a MAC (CtlAnswer) */
#define CTL_CHALLENGE_BYTES 32u
#define CTL_NONCE_BYTES     32u
#define CTL_KEY_BYTES       32u      /* crypto_auth_KEYBYTES, CXLCR_POD_KEY_BYTES */
#define CTL_FRAME_MAX       (128u * 1024u)  /* larger frames are refused unread */
#define CTL_CHUNK           (16u * 1024u)   /* output goes back in pieces of at most this */
#define CTL_ARGS_MAX        256u
#define CTL_ARGS_LEN_MAX    65536u   /* bytes of arguments, NULs included */
#define CTL_REFUSED_MAX     512u

/* What binds the answers of one connection to its request, at both ends:
 * the pod's key, the nonce the client put in the request, and how many
 * answers were sealed (daemon) or checked (client) so far. */
struct ctl_seal {
	uint8_t key[CTL_KEY_BYTES];
	uint8_t nonce[CTL_NONCE_BYTES];
	uint64_t seq;
};

/* Encoders: a whole frame (length included) in a malloc'd buffer, or NULL
 * (with cxlcr_last_error()). */
uint8_t *ctl_hello_encode(const uint8_t challenge[CTL_CHALLENGE_BYTES], size_t *len);
/* The request, with seal's nonce (the caller draws it) and MAC'd under its key. */
uint8_t *ctl_request_encode(const uint8_t challenge[CTL_CHALLENGE_BYTES], const struct ctl_seal *seal,
			    int argc, char **argv, size_t *len);
/* An answer of the daemon's into buf (of cap bytes, at least CTL_CHUNK +
 * 128): output of stream (1 or 2), or, with data NULL, the exit status,
 * sealed with seal (which counts it); or, with refused set, a refusal, which
 * is never sealed (seal unused). No allocation (the output relay calls it
 * while the worker may fork). Returns the frame's length, 0 if it does not
 * fit. */
size_t ctl_frame_encode(uint8_t *buf, size_t cap, struct ctl_seal *seal, int stream, const void *data,
			size_t n, int status, const char *refused);

/* Parsers of one frame's body (without its length). Each returns 0, or -1
 * with one phrase in why. */
int ctl_hello_parse(const uint8_t *buf, size_t len, uint8_t challenge[CTL_CHALLENGE_BYTES], char *why,
		    size_t why_len);
/* The request of a connection whose challenge was challenge, checked
 * against the pod's key: *argv is one allocation (free it), NULL-ended;
 * the request's nonce into nonce (to seal the answers with). */
int ctl_request_parse(const uint8_t *buf, size_t len, const uint8_t challenge[CTL_CHALLENGE_BYTES],
		      const uint8_t key[CTL_KEY_BYTES], int *argc, char ***argv,
		      uint8_t nonce[CTL_NONCE_BYTES], char *why, size_t why_len);

enum ctl_frame_kind { CTL_OUTPUT = 1, CTL_STATUS, CTL_REFUSED };
struct ctl_frame {
	enum ctl_frame_kind kind;
	int stream;                   /* CTL_OUTPUT: 1 or 2 */
	uint8_t *data;                /* CTL_OUTPUT: malloc'd, len bytes */
	size_t len;
	int status;                   /* CTL_STATUS */
	char refused[CTL_REFUSED_MAX]; /* CTL_REFUSED */
};
/* An answer, checked against seal (which counts it): an output or status
 * without a good MAC for this request and this place in the answers is
 * refused, as forged or replayed; a refusal passes only as the first
 * answer. With seal NULL nothing is checked (tests that play an attacker). */
int ctl_frame_parse(const uint8_t *buf, size_t len, struct ctl_seal *seal, struct ctl_frame *f, char *why,
		    size_t why_len);

/* The frame of an envelope: the packed request (n bytes) and its MAC under
 * key. ctl_request_encode() makes its frames so; tests/ctl_fuzz.c, the
 * frames of requests that the encoder refuses. Malloc'd, or NULL. */
uint8_t *ctl_envelope_encode(const uint8_t *request, size_t n, const uint8_t key[CTL_KEY_BYTES], size_t *len);

/* Reads one frame's body into a malloc'd *buf by deadline (CLOCK_MONOTONIC
 * ns): -1 with errno ETIMEDOUT, EPIPE (closed) or EMSGSIZE (over
 * CTL_FRAME_MAX: nothing more is read). */
int ctl_read_frame(int fd, uint8_t **buf, size_t *len, uint64_t deadline);
/* Reads exactly n bytes by deadline: -1 with errno ETIMEDOUT or EPIPE. */
int ctl_read_exact(int fd, void *p, size_t n, uint64_t deadline);
/* Writes all of p to a socket (never SIGPIPE) or another fd. */
int ctl_write_all(int fd, const void *p, size_t n);
/* The milliseconds left until deadline (CLOCK_MONOTONIC ns), rounded up:
 * 0 once it has passed. */
int ctl_ms_left(uint64_t deadline);

#endif
