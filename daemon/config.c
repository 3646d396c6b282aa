/* cxlcrd's configuration file (see config.h). */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/cpus.h"
#include "../common/error.h"
#include "../common/pool_format.h"
#include "../common/util.h"
#include "../tracking/idle.h"
#include "../pager/ahead.h"
#include "../pager/pager.h"
#include "config.h"

void daemon_config_init(struct daemon_config *c)
{
	memset(c, 0, sizeof(*c));
	c->port = -1;
	c->recovery_interval_ms = -1;
	c->tier_warm = -1;
}

long daemon_config_interval(const char *text)
{
	char *end;
	errno = 0;
	long v = strtol(text, &end, 10);
	return errno || end == text || *end || v < 0 || v > 86400000 ? -1 : v;
}

long daemon_config_lease(const char *text)
{
	char *end;
	errno = 0;
	long v = strtol(text, &end, 10);
	return errno || end == text || *end || v < 1 || v > 3600000 ? -1 : v;
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
	} else if (!strcmp(key, "lease")) {
		if ((c->lease_ms = daemon_config_lease(value)) < 0) {
			snprintf(why, len, "lease '%.100s' is not a number of milliseconds from 1 to 3600000", value);
			return false;
		}
	} else if (!strcmp(key, "recovery_interval")) {
		if ((c->recovery_interval_ms = daemon_config_interval(value)) < 0) {
			snprintf(why, len, "recovery_interval '%.100s' is not a number of milliseconds from 0 to 86400000",
				 value);
			return false;
		}
	} else if (!strcmp(key, "tier_warm")) {
		if (strcmp(value, "yes") && strcmp(value, "no")) {
			snprintf(why, len, "tier_warm '%.100s' is not yes or no", value);
			return false;
		}
		c->tier_warm = !strcmp(value, "yes");
	} else if (!strcmp(key, "pager_cpus")) {
		struct cpu_list l;
		if (cxlcr_parse_cpus(value, &l) < 0) {
			snprintf(why, len, "pager_cpus '%.100s' is not a CPU list (as 0-3,8)", value);
			return false;
		}
		snprintf(c->pager_cpus, sizeof(c->pager_cpus), "%s", value);
	} else if (!strcmp(key, "cold_ahead_mb")) {
		if (ahead_limit_parse(value) < 0) {
			snprintf(why, len, "cold_ahead_mb %s", cxlcr_last_error());
			return false;
		}
		snprintf(c->cold_ahead_mb, sizeof(c->cold_ahead_mb), "%s", value);
	} else if (!strcmp(key, "fault_around")) {
		if (pager_fault_around_parse(value) < 0) {
			snprintf(why, len, "fault_around %s", cxlcr_last_error());
			return false;
		}
		snprintf(c->fault_around, sizeof(c->fault_around), "%s", value);
	} else if (!strcmp(key, "huge_after_s")) {
		if (tracking_huge_after_parse(value) < 0) {
			snprintf(why, len, "huge_after_s %s", cxlcr_last_error());
			return false;
		}
		snprintf(c->huge_after_s, sizeof(c->huge_after_s), "%s", value);
	} else {
		snprintf(why, len,
			 "unknown key '%.100s' (host, pool, address, port, lease, recovery_interval, tier_warm, pager_cpus, cold_ahead_mb, "
			 "fault_around, huge_after_s)",
			 key);
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
