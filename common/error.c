#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "error.h"

static __thread char last_error[CXLCR_ERROR_MAX];

/* Formats into a buffer of its own first: an argument may be
 * cxlcr_last_error() itself (a caller adding context to a failure). */
int cxlcr_error(const char *fmt, ...)
{
	char buf[CXLCR_ERROR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	memcpy(last_error, buf, sizeof(buf));
	return -1;
}

const char *cxlcr_last_error(void)
{
	return last_error[0] ? last_error : "unknown error";
}
