/*
 * The fork API's wire protocol (described in include/cxlcr/cxlcr.h), shared
 * by the client library (lib/) and the daemon (daemon/api.c): framing and
 * encoding here (api/protocol.c), decoding in api/decode.c. Nothing knows about
 * sockets' ends or the pool; errors are one line in a caller's buffer.
 */
#ifndef CXLCR_API_PROTOCOL_H
#define CXLCR_API_PROTOCOL_H
#include <stdbool.h>
#include <stddef.h>

#include <stdint.h>

#include "../common/seal.h"
#include "../include/cxlcr/cxlcr.h"

#define API_REQUEST_MAX 4096
#define API_REPLY_MAX   65536
#define API_ERROR_MAX   512
#define API_TOKEN_MAX   128 /* longer than any token: a longer one is refused */

struct api_request {
	char op[16];
	char service[CXLCR_API_NAME_MAX];
	char host[CXLCR_API_NAME_MAX];
	unsigned count;
	char mode[8];   /* "" (the default), "share" or "copy" */
	char fetch[16]; /* "" (the default), "background", "eager" or "lazy" */
	char nonce[2 * CXLCR_SEAL_NONCE_BYTES + 1]; /* hex; "" when the request has none (then
						     * the reply comes unsealed) */
};

/* Each encoder (Jansson's, compact) returns a malloc'd, NUL-terminated line
 * ending in '\n' (its length in *len), or NULL when out of memory. Bytes
 * of a string that are not UTF-8 (an error can carry what a client sent)
 * go out as U+FFFD. */
char *api_request_encode(const struct api_request *req, size_t *len);
char *api_reply_encode(const struct cxlcr_fork_result *res, size_t *len);
char *api_error_encode(const char *error, size_t *len);

/*
 * Over TCP both ways are sealed under the API key, which both ends derive
 * from the pod's API token (the token itself never travels):
 *   - the client says hello first, API_HELLO on a line (the port serves
 *     the control protocol too, told apart by the client's first bytes:
 *     daemon/rpc_tcp.h), and the daemon greets it with a fresh random
 *     challenge,
 *       {"challenge":"<64 hex digits>"}
 *     (or, when it cannot serve it, a refusal: {"ok":false,"error":"busy: ..."});
 *   - the client seals its request line for that challenge, and puts a
 *     fresh random nonce of its own in it:
 *       {"sealed":"<the request line, without its newline>","mac":"<64 hex digits>"}
 *     A request that is not sealed, or whose MAC does not check (another
 *     key: a wrong token; another challenge: recorded from another
 *     connection and played again) is refused, "not authorised", and
 *     changes nothing;
 *   - the daemon seals its reply line the same way for the request's nonce.
 *     A refusal before the daemon trusts the request (not authorised, a
 *     line it cannot read, busy) comes unsealed.
 * (common/seal.h: HMAC-SHA-512-256 over a label, the challenge or nonce, 0
 * and the line.)
 */
#define API_HELLO "{\"op\":\"hello\"}"

/* The API key of a token of CXLCR_API_TOKEN_LEN hex digits: 0, or -1 if
 * the token is not one. */
int api_mac_key(const char *token, uint8_t key[CXLCR_SEAL_KEY_BYTES]);
/* A nonce or challenge from its hex digits: 0, or -1. */
int api_nonce_parse(const char *hex, uint8_t nonce[CXLCR_SEAL_NONCE_BYTES]);
/* The daemon's greeting line with challenge; NULL when out of memory. */
char *api_greeting_encode(const uint8_t challenge[CXLCR_SEAL_NONCE_BYTES], size_t *len);
/* A greeting line read by the client: 0 with the challenge; -1 with err
 * holding the daemon's refusal (busy), or why the line is no greeting. */
int api_greeting_decode(const char *line, size_t len, uint8_t challenge[CXLCR_SEAL_NONCE_BYTES], char *err,
			size_t errlen);
/* The sealed line of a request line for challenge, or of a reply line for
 * nonce (len bytes, its '\n' included, as the encoders return it); NULL
 * when out of memory. */
char *api_request_seal(const char *request, size_t len, const uint8_t key[CXLCR_SEAL_KEY_BYTES],
		       const uint8_t challenge[CXLCR_SEAL_NONCE_BYTES], size_t *out_len);
char *api_reply_seal(const char *reply, size_t len, const uint8_t key[CXLCR_SEAL_KEY_BYTES],
		     const uint8_t nonce[CXLCR_SEAL_NONCE_BYTES], size_t *out_len);
/* A request line read over TCP on the connection greeted with challenge:
 * 0 with *req decoded, when it is sealed under key (NULL: the daemon has
 * none) and its request is good; -1 with the refusal in err, and with
 * what the log should say of it in why. */
int api_request_open(const char *line, size_t len, const uint8_t *key,
		     const uint8_t challenge[CXLCR_SEAL_NONCE_BYTES], struct api_request *req, char *err,
		     size_t errlen, char *why, size_t whylen);
/* A reply line read over TCP for the request of nonce: a sealed one whose
 * MAC checks under key is decoded as api_reply_decode() does; an unsealed
 * one is taken only as a refusal ("ok":false, its error in err); any other
 * (a MAC of another key or another request's nonce: forged or replayed,
 * or an unsealed success) is refused with one line in err. key NULL: the
 * client has no key (no token of the right form); only refusals pass. */
int api_reply_open(const char *line, size_t len, const uint8_t *key, const uint8_t nonce[CXLCR_SEAL_NONCE_BYTES],
		   struct cxlcr_fork_result *res, char *err, size_t errlen);
/* Whether mac_hex is the MAC of the reply line inner (n bytes) under key
 * for nonce, or of the request line for challenge (what the openers
 * check). */
bool api_reply_sealed_by(const char *inner, size_t n, const char *mac_hex, const uint8_t key[CXLCR_SEAL_KEY_BYTES],
			 const uint8_t nonce[CXLCR_SEAL_NONCE_BYTES]);
bool api_request_sealed_by(const char *inner, size_t n, const char *mac_hex, const uint8_t key[CXLCR_SEAL_KEY_BYTES],
			   const uint8_t challenge[CXLCR_SEAL_NONCE_BYTES]);
#define API_REPLY_FORGED "reply not authenticated (no MAC under the pod's token for this request: forged or replayed)"
#define API_NOT_AUTHORISED "not authorised"

/* Decodes and checks a request line: 0, or -1 with why in err. */
int api_request_decode(const char *line, size_t len, struct api_request *req, char *err,
		       size_t errlen);
/* Decodes a reply line: 0 with *res filled, or -1 with err holding the
 * daemon's error line, or why the reply could not be read. */
int api_reply_decode(const char *line, size_t len, struct cxlcr_fork_result *res, char *err,
		     size_t errlen);

/* Formats a one-line error into err; returns -1. */
__attribute__((format(printf, 3, 4)))
int api_say(char *err, size_t errlen, const char *fmt, ...);

/* Reads one line of at most max bytes (its '\n' not counted, nor kept) into
 * buf (max + 1 bytes). 0, or -1 with why in err. */
int api_read_line(int fd, char *buf, size_t max, size_t *len, char *err, size_t errlen);
/* Writes all of buf to a socket; 0, or -1 with errno (never SIGPIPE). */
int api_write_all(int fd, const char *buf, size_t len);

#endif
