/*
 * Sealing an answer to one request: a MAC under a shared key over a label,
 * the nonce the requester drew for that request, the answer's place among
 * the answers to it, and the answer's bytes. An answer forged without the
 * key, recorded from another request (another nonce), repeated or
 * reordered does not check. The daemons' control protocol
 * (daemon/rpc_wire.c, under the pod's key) and the fork API's TCP replies
 * (api/, under the key of the pod's API token) both seal with this.
 */
#ifndef CXLCR_SEAL_H
#define CXLCR_SEAL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CXLCR_SEAL_KEY_BYTES   32u /* crypto_auth_hmacsha512256_KEYBYTES */
#define CXLCR_SEAL_NONCE_BYTES 32u
#define CXLCR_SEAL_MAC_BYTES   32u /* crypto_auth_hmacsha512256_BYTES */

/* The MAC of the answer numbered seq to the request of nonce. label (with
 * its NUL, so that no label is another's prefix) says which protocol and
 * message it is. No allocation: the control protocol's output relay calls
 * it while the worker may fork. */
void cxlcr_seal_mac(uint8_t mac[CXLCR_SEAL_MAC_BYTES], const uint8_t key[CXLCR_SEAL_KEY_BYTES],
		    const char *label, const uint8_t nonce[CXLCR_SEAL_NONCE_BYTES], uint64_t seq,
		    const void *msg, size_t n);
/* Whether mac (of mac_len bytes) is that MAC, compared in constant time. */
bool cxlcr_seal_check(const uint8_t *mac, size_t mac_len, const uint8_t key[CXLCR_SEAL_KEY_BYTES],
		      const char *label, const uint8_t nonce[CXLCR_SEAL_NONCE_BYTES], uint64_t seq,
		      const void *msg, size_t n);

#endif
