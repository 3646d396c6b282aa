/* cxlcrd's configuration file (see config.h). */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/error.h"
#include "../common/pool_format.h"
#include "../common/util.h"
#include "config.h"

void daemon_config_init(struct daemon_config *c)
{
	memset(c, 0, sizeof(*c));
	c->port = -1;
}

int daemon_config_port(const char *text)
{
	char *end;
	errno = 0;
	long port = strtol(text, &end, 10);
	return !*text || *end || errno || port < 0 || port > 65535 ? -1 : (int)port;
}

bool daemon_config_address_ok(const char *text)
{
	struct in_addr a;
	return inet_pton(AF_INET, text, &a) == 1;
}

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	char *e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = 0;
	return s;
}

/* One `key = value` line into c; the reason in why if it is wrong. */
static bool set_key(struct daemon_config *c, const char *key, const char *value, char *why, size_t len)
{
	if (strlen(value) >= DAEMON_CONFIG_VALUE_MAX) {
		snprintf(why, len, "the value of %s is too long", key);
		return false;
	}
	if (!strcmp(key, "host")) {
		if (!cxlcr_valid_name(value) || strlen(value) >= CXLCR_HOST_MAX) {
			snprintf(why, len, "host '%.100s' is not a valid host name", value);
			return false;
		}
		snprintf(c->host, sizeof(c->host), "%s", value);
	} else if (!strcmp(key, "pool")) {
		if (value[0] != '/') {
			snprintf(why, len, "pool '%.100s' is not an absolute path", value);
			return false;
		}
		snprintf(c->pool, sizeof(c->pool), "%s", value);
	} else if (!strcmp(key, "address")) {
		if (!daemon_config_address_ok(value)) {
			snprintf(why, len, "address '%.100s' is not an IPv4 address", value);
			return false;
		}
		snprintf(c->address, sizeof(c->address), "%s", value);
	} else if (!strcmp(key, "port")) {
		if ((c->port = daemon_config_port(value)) < 0) {
			snprintf(why, len, "port '%.100s' is not a number from 0 to 65535", value);
			return false;
		}
	} else {
		snprintf(why, len, "unknown key '%.100s' (host, pool, address, port)", key);
		return false;
	}
	return true;
}

int daemon_config_read(const char *path, struct daemon_config *c)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return cxlcr_error("cannot read %s: %s", path, strerror(errno));
	char line[1024], why[256];
	int n = 0, rc = 0;
	while (rc == 0 && fgets(line, sizeof(line), f)) {
		n++;
		if (!strchr(line, '\n') && !feof(f)) {
			rc = cxlcr_error("%s:%d: line too long", path, n);
			break;
		}
		char *hash = strchr(line, '#');
		if (hash)
			*hash = 0;
		char *s = trim(line);
		if (!*s)
			continue;
		char *eq = strchr(s, '=');
		if (!eq) {
			rc = cxlcr_error("%s:%d: expected 'key = value'", path, n);
			break;
		}
		*eq = 0;
		char *key = trim(s), *value = trim(eq + 1);
		if (!*value)
			rc = cxlcr_error("%s:%d: %s has no value", path, n, key);
		else if (!set_key(c, key, value, why, sizeof(why)))
			rc = cxlcr_error("%s:%d: %s", path, n, why);
	}
	if (rc == 0 && ferror(f))
		rc = cxlcr_error("cannot read %s: %s", path, strerror(errno));
	fclose(f);
	return rc;
}
