#include <stdarg.h>
#include <stdio.h>
#include "error.h"

static __thread char last_error[CXLCR_ERROR_MAX];

int cxlcr_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	return -1;
}

const char *cxlcr_last_error(void)
{
	return last_error[0] ? last_error : "unknown error";
}
