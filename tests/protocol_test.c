/*
 * The fork API's wire protocol against hostile input (api/protocol.c,
 * daemon/json.c): a reply whose numbers do not fit their fields is refused
 * instead of cast (undefined behaviour), a request or reply with a key
 * given twice is refused whole (two "mac"s could be read differently
 * by two readers), a request over TCP is taken only sealed for its
 * connection's challenge, and JSON written with bytes that
 * are not UTF-8 (a name or an error a client sent) is still valid JSON.
 */
#include "../api/protocol.h"
#include "../daemon/json.h"
#include "test.h"

static int decode(const char *reply)
{
	struct cxlcr_fork_result res;
	char err[256];
	return api_reply_decode(reply, strlen(reply), &res, err, sizeof(err));
}

#define CHILD(pid, pages) \
	"{\"ok\":true,\"children\":[{\"name\":\"a.1\",\"host\":\"h1\",\"address\":\"10.0.0.2\",\"pid\":" pid \
	",\"restore_ms\":1,\"prefetched_pages\":" pages "}],\"image_bytes\":5}"

/* Decodes a request: its return, with why in err. */
static int request(const char *line, struct api_request *req, char *err, size_t len)
{
	err[0] = 0;
	return api_request_decode(line, strlen(line), req, err, len);
}

int main(void)
{
	printf("protocol_test: the fork API's messages against hostile input\n");
	SAY("a well-formed reply is taken");
	CHECK(decode(CHILD("1234", "7")) == 0);
	SAY("numbers that do not fit their fields are refused, not cast");
	static const char *const bad[] = {
		CHILD("1e300", "7"), CHILD("-5", "7"), CHILD("3.5", "7"), CHILD("4294967296", "7"),
		CHILD("12", "1e30"), CHILD("12", "-1"),
		"{\"ok\":true,\"children\":[],\"image_bytes\":1e300}",
		"{\"ok\":true,\"children\":[],\"snapshot_bytes\":-3}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(decode(bad[i]) != 0, "accepted: %s", bad[i]);

	SAY("a request is decoded; one with a key given twice is refused and unread");
	struct api_request req;
	char err[512];
	CHECK(request("{\"op\":\"fork\",\"service\":\"web\",\"host\":\"h1\",\"count\":2}", &req, err,
		      sizeof(err)) == 0, "%s", err);
	CHECK(req.count == 2 && !strcmp(req.host, "h1"));
	CHECK(request("{\"op\":\"fork\",\"service\":\"web\",\"host\":\"h1\",\"count\":2,\"token\":\"t\"}",
		      &req, err, sizeof(err)) != 0 && strstr(err, "unknown field 'token'"), "%s", err);
	static const char *const twice[] = {
		"{\"op\":\"fork\",\"service\":\"web\",\"host\":\"h1\",\"count\":1,\"count\":2}",
		"{\"op\":\"fork\",\"service\":\"web\",\"host\":\"h1\",\"count\":1,\"mode\":\"copy\",\"mode\":\"share\"}",
		"{\"op\":\"release\",\"op\":\"fork\",\"service\":\"web\",\"host\":\"h1\",\"count\":1}",
	};
	for (size_t i = 0; i < sizeof(twice) / sizeof(twice[0]); i++) {
		CHECK(request(twice[i], &req, err, sizeof(err)) != 0, "accepted: %s", twice[i]);
		CHECK(strstr(err, "duplicate object key"), "refused for another reason: %s", err);
	}

	SAY("a request sealed for the connection's challenge is opened; replayed, forged or unsealed: not authorised");
	uint8_t key[CXLCR_SEAL_KEY_BYTES], other[CXLCR_SEAL_KEY_BYTES], challenge[CXLCR_SEAL_NONCE_BYTES];
	char why[512];
	size_t n, sn;
	CHECK(api_mac_key("00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff", key) == 0);
	CHECK(api_mac_key("10112233445566778899aabbccddeeff00112233445566778899aabbccddeeff", other) == 0);
	memset(challenge, 7, sizeof(challenge));
	struct api_request out = { .op = "fork", .service = "web", .host = "h1", .count = 3, .mode = "copy" };
	char *line = api_request_encode(&out, &n);
	CHECK(line && !strcmp(line, "{\"op\":\"fork\",\"service\":\"web\",\"host\":\"h1\",\"count\":3,\"mode\":\"copy\"}\n"),
	      "encoded as %s", line);
	char *sealed = api_request_seal(line, n, key, challenge, &sn);
	CHECK(sealed && sealed[sn - 1] == '\n');
	CHECK(api_request_open(sealed, sn - 1, key, challenge, &req, err, sizeof(err), why, sizeof(why)) == 0, "%s", why);
	CHECK(req.count == 3 && !strcmp(req.service, "web") && !strcmp(req.mode, "copy"));
	uint8_t again[CXLCR_SEAL_NONCE_BYTES];
	memset(again, 8, sizeof(again));
	CHECK(api_request_open(sealed, sn - 1, key, again, &req, err, sizeof(err), why, sizeof(why)) < 0 &&
	      !strcmp(err, API_NOT_AUTHORISED) && strstr(why, "replayed"), "%s / %s", err, why);
	CHECK(api_request_open(sealed, sn - 1, other, challenge, &req, err, sizeof(err), why, sizeof(why)) < 0 &&
	      !strcmp(err, API_NOT_AUTHORISED) && strstr(why, "wrong token"), "%s / %s", err, why);
	CHECK(api_request_open(sealed, sn - 1, NULL, challenge, &req, err, sizeof(err), why, sizeof(why)) < 0 &&
	      !strcmp(err, API_NOT_AUTHORISED));
	CHECK(api_request_open(line, n - 1, key, challenge, &req, err, sizeof(err), why, sizeof(why)) < 0 &&
	      !strcmp(err, API_NOT_AUTHORISED) && strstr(why, "not sealed"), "%s / %s", err, why);
	CHECK(api_request_open("not json", 8, key, challenge, &req, err, sizeof(err), why, sizeof(why)) < 0 &&
	      strstr(err, "bad request: malformed JSON"), "%s", err);
	free(sealed);
	struct api_request bad_count = out;
	bad_count.count = 0;
	free(line);
	line = api_request_encode(&bad_count, &n);
	sealed = api_request_seal(line, n, key, challenge, &sn);
	CHECK(api_request_open(sealed, sn - 1, key, challenge, &req, err, sizeof(err), why, sizeof(why)) < 0 &&
	      strstr(err, "count must be an integer"), "a sealed bad request: %s", err);
	free(sealed);
	free(line);

	SAY("the daemon's greeting carries a challenge; a refusal instead is told as it is");
	char *hello = api_greeting_encode(challenge, &n);
	memset(again, 0, sizeof(again));
	CHECK(hello && api_greeting_decode(hello, n - 1, again, err, sizeof(err)) == 0 &&
	      !memcmp(again, challenge, sizeof(again)), "%s", err);
	free(hello);
	char *busy = api_error_encode("busy: 8 requests of yours are being served", &n);
	CHECK(api_greeting_decode(busy, n - 1, again, err, sizeof(err)) < 0 && !strcmp(err, "busy: 8 requests of yours are being served"),
	      "%s", err);
	free(busy);
	CHECK(api_greeting_decode("{\"challenge\":\"00\"}", 17, again, err, sizeof(err)) < 0 &&
	      strstr(err, "malformed greeting"), "%s", err);
	CHECK(api_greeting_decode("{\"ok\":true}", 11, again, err, sizeof(err)) < 0 && strstr(err, "malformed greeting"),
	      "%s", err);

	SAY("an error line with bytes that are not UTF-8 is valid JSON (U+FFFD)");
	char *e = api_error_encode("no service 'x\xff\xc0\xafy' (caf\xc3\xa9)", &n);
	struct cxlcr_fork_result none;
	CHECK(e && api_reply_decode(e, n - 1, &none, err, sizeof(err)) < 0 &&
	      !strcmp(err, "no service 'x\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdy' (caf\xc3\xa9)"), "%s -> %s", e, err);
	free(e);
	SAY("a reply with a key given twice is refused");
	CHECK(decode("{\"ok\":false,\"ok\":true,\"children\":[]}") != 0);
	CHECK(decode("{\"ok\":true,\"children\":[{\"pid\":1,\"pid\":2}]}") != 0);

	SAY("bytes that are not UTF-8 are written as U+FFFD; UTF-8 passes");
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	CHECK(f != NULL);
	struct json j;
	json_begin(&j, f);
	json_str(&j, "error", "no service 'x\xff\xfe\xc0\xafy' (caf\xc3\xa9, \xe2\x82\xac, \xed\xa0\x80)");
	json_end(&j);
	fclose(f);
	for (size_t i = 0; i < len; i++)
		CHECK(!((unsigned char)buf[i] == 0xff || (unsigned char)buf[i] == 0xfe ||
			(unsigned char)buf[i] == 0xc0 || (unsigned char)buf[i] == 0xed),
		      "raw invalid byte %#x at %zu in %s", (unsigned char)buf[i], i, buf);
	CHECK(strstr(buf, "x\\ufffd\\ufffd\\ufffd\\ufffdy") != NULL, "invalid bytes not replaced: %s", buf);
	CHECK(strstr(buf, "caf\xc3\xa9") && strstr(buf, "\xe2\x82\xac"), "valid UTF-8 was changed: %s", buf);
	free(buf);
	printf("protocol_test: all checks passed\n");
	return 0;
}
