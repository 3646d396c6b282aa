/*
 * cxlcr: the command line of cxlcr. Verbs run here, or, for a pod host,
 * in that host's cxlcrd (see rpc.h).
 */
#include "cli.h"

int main(int argc, char **argv)
{
	return cli_dispatch(argc - 1, argv + 1);
}
