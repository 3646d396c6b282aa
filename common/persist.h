/*
 * Making writes to the pool visible to other hosts.
 *
 * A CXL 2.0 memory device shared by several hosts is not cache-coherent
 * between them: a store sits in this host's cache until it is written back,
 * and a load may hit a stale line that another host has since changed. So a
 * writer flushes what it wrote and fences before it signals anything, and a
 * reader invalidates the lines it is about to read. On an emulated pool these
 * are needless but harmless, and the same code runs.
 */
#ifndef CXLCR_PERSIST_H
#define CXLCR_PERSIST_H

#include <stddef.h>
#include <stdint.h>
#include "pool_format.h"

static inline void cxlcr_fence(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ __volatile__("mfence" ::: "memory");
#elif defined(__aarch64__)
	__asm__ __volatile__("dsb sy" ::: "memory");
#else
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* clflushopt (CPUID.7.0:EBX bit 23) writes back and invalidates like
 * clflush, but without serialising each line against the next: flushing a
 * megabyte takes a fraction of the time. The fences around it order it. */
static inline int cxlcr_have_clflushopt(void)
{
	static int have = -1;
	if (have < 0) {
		unsigned a, b = 0, c, d;
		have = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 23));
	}
	return have;
}
#endif

/* Write back and invalidate every cache line of [p, p+len): clflushopt or
 * clflush on x86, DC CIVAC on arm64. */
static inline void cxlcr_flush_lines(const void *p, size_t len)
{
	uintptr_t line = (uintptr_t)p & ~(uintptr_t)(CXLCR_CACHELINE - 1);
	uintptr_t end = (uintptr_t)p + len;
#if defined(__x86_64__) || defined(__i386__)
	if (cxlcr_have_clflushopt()) {
		for (; line < end; line += CXLCR_CACHELINE)
			__asm__ __volatile__("clflushopt %0" : "+m"(*(volatile char *)line));
		return;
	}
#endif
	for (; line < end; line += CXLCR_CACHELINE) {
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_clflush((const void *)line);
#elif defined(__aarch64__)
		__asm__ __volatile__("dc civac, %0" ::"r"(line) : "memory");
#endif
	}
}

/* After writing: make [p, p+len) visible to the other hosts. */
static inline void cxlcr_publish(const void *p, size_t len)
{
	cxlcr_fence();
	cxlcr_flush_lines(p, len);
	cxlcr_fence();
}

/* Before reading what another host may have written. */
static inline void cxlcr_refresh(const void *p, size_t len)
{
	cxlcr_flush_lines(p, len);
	cxlcr_fence();
}

#endif
