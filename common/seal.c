#include <sodium.h>
#include <string.h>

#include "seal.h"

_Static_assert(CXLCR_SEAL_KEY_BYTES == crypto_auth_hmacsha512256_KEYBYTES, "an HMAC-SHA-512-256 key");
_Static_assert(CXLCR_SEAL_MAC_BYTES == crypto_auth_hmacsha512256_BYTES, "an HMAC-SHA-512-256 tag");

/* libsodium's HMAC-SHA-512-256 (what crypto_auth is), fed piecewise: the
 * label, the nonce, seq (8 bytes, big-endian), the message. */
void cxlcr_seal_mac(uint8_t mac[CXLCR_SEAL_MAC_BYTES], const uint8_t key[CXLCR_SEAL_KEY_BYTES],
		    const char *label, const uint8_t nonce[CXLCR_SEAL_NONCE_BYTES], uint64_t seq,
		    const void *msg, size_t n)
{
	uint8_t seq_be[8];
	for (int i = 0; i < 8; i++)
		seq_be[i] = (uint8_t)(seq >> (56 - 8 * i));
	crypto_auth_hmacsha512256_state st;
	crypto_auth_hmacsha512256_init(&st, key, CXLCR_SEAL_KEY_BYTES);
	crypto_auth_hmacsha512256_update(&st, (const unsigned char *)label, strlen(label) + 1);
	crypto_auth_hmacsha512256_update(&st, nonce, CXLCR_SEAL_NONCE_BYTES);
	crypto_auth_hmacsha512256_update(&st, seq_be, sizeof(seq_be));
	crypto_auth_hmacsha512256_update(&st, msg, n);
	crypto_auth_hmacsha512256_final(&st, mac);
	sodium_memzero(&st, sizeof(st));
}

bool cxlcr_seal_check(const uint8_t *mac, size_t mac_len, const uint8_t key[CXLCR_SEAL_KEY_BYTES],
		      const char *label, const uint8_t nonce[CXLCR_SEAL_NONCE_BYTES], uint64_t seq,
		      const void *msg, size_t n)
{
	uint8_t want[CXLCR_SEAL_MAC_BYTES];
	if (mac_len != sizeof(want))
		return false;
	cxlcr_seal_mac(want, key, label, nonce, seq, msg, n);
	bool good = sodium_memcmp(want, mac, sizeof(want)) == 0;
	sodium_memzero(want, sizeof(want));
	return good;
}
