/*
 * Errors in cxlcr are one line that says what failed and why. Library code
 * records that line with cxlcr_error() and returns -1; the command that
 * called it prints it once. The buffer is per thread and needs no malloc,
 * so the preload can use it before its allocator exists.
 */
#ifndef CXLCR_ERROR_H
#define CXLCR_ERROR_H

#define CXLCR_ERROR_MAX 512

__attribute__((format(printf, 1, 2)))
int cxlcr_error(const char *fmt, ...);         /* always returns -1 */
const char *cxlcr_last_error(void);

#endif
