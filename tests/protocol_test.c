/*
 * The fork API's wire protocol against hostile input (api/protocol.c,
 * daemon/json.c): a reply whose numbers do not fit their fields is refused
 * instead of cast (undefined behaviour), a request or reply with a key
 * given twice is refused whole (two "token"s could be read differently
 * by two readers), and JSON written with bytes that
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
	CHECK(request("{\"op\":\"fork\",\"service\":\"web\",\"host\":\"h1\",\"count\":2,\"token\":\"t\"}",
		      &req, err, sizeof(err)) == 0, "%s", err);
	CHECK(req.count == 2 && !strcmp(req.token, "t") && !strcmp(req.host, "h1"));
	static const char *const twice[] = {
		"{\"op\":\"fork\",\"service\":\"web\",\"host\":\"h1\",\"count\":1,\"count\":2}",
		"{\"op\":\"fork\",\"service\":\"web\",\"host\":\"h1\",\"count\":1,\"token\":\"a\",\"token\":\"b\"}",
		"{\"op\":\"release\",\"op\":\"fork\",\"service\":\"web\",\"host\":\"h1\",\"count\":1}",
	};
	for (size_t i = 0; i < sizeof(twice) / sizeof(twice[0]); i++) {
		CHECK(request(twice[i], &req, err, sizeof(err)) != 0, "accepted: %s", twice[i]);
		CHECK(!req.readable && !req.token[0], "read, token '%s': %s", req.token, twice[i]);
		CHECK(strstr(err, "duplicate object key"), "refused for another reason: %s", err);
	}
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
