#ifndef CXLCR_DEVDAX_H
#define CXLCR_DEVDAX_H
#include <stdint.h>
#include <sys/types.h>

/* Capacity of the devdax device with this device number, as libdaxctl
 * reports it. Fails for a character device that is not devdax. */
int cxlcr_devdax_size(dev_t rdev, const char *path, uint64_t *size);
/* The physical address of the device's first byte (libdaxctl's resource):
 * what the panic tombstone's kernel module maps (kernel/). */
int cxlcr_devdax_phys(dev_t rdev, const char *path, uint64_t *phys);

#endif
