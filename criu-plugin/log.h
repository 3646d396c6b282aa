/*
 * Logging into CRIU's log, the way CRIU's own plugins do: through
 * print_on_level(), which the criu binary exports and the dynamic linker
 * resolves when CRIU loads the plugin. The installed criu-log.h cannot be
 * used for it (it includes a log.h that is not installed), so the one
 * declaration and the levels (CRIU's LOG_ERROR .. LOG_DEBUG) are given here.
 * Every line starts with "cxlcr: ", after CRIU's "Error (file:line): ".
 */
#ifndef CXLCR_CRIU_LOG_H
#define CXLCR_CRIU_LOG_H

#define CX_LOG_ERROR 1
#define CX_LOG_WARN  2
#define CX_LOG_INFO  3
#define CX_LOG_DEBUG 4

extern void print_on_level(unsigned int loglevel, const char *format, ...)
	__attribute__((format(printf, 2, 3)));

#define LOG_PREFIX "cxlcr: "
#define pr_err(fmt, ...) \
	print_on_level(CX_LOG_ERROR, "Error (%s:%d): " LOG_PREFIX fmt, __FILE__, __LINE__, ##__VA_ARGS__)
#define pr_warn(fmt, ...) \
	print_on_level(CX_LOG_WARN, "Warn  (%s:%d): " LOG_PREFIX fmt, __FILE__, __LINE__, ##__VA_ARGS__)
#define pr_info(fmt, ...) print_on_level(CX_LOG_INFO, LOG_PREFIX fmt, ##__VA_ARGS__)
#define pr_debug(fmt, ...) print_on_level(CX_LOG_DEBUG, LOG_PREFIX fmt, ##__VA_ARGS__)

#endif
