/* mkpool: create an empty pool with a layout name, as `pmempool create obj --layout` does, for
 * the examples that open an existing pool (queue, pmemblk, pmemlog). A test helper
 * (tests/pmdk.rs), built against PMDK and against locsim-pmemobj alike. */
#include <libpmemobj.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char *argv[])
{
	if (argc != 4) {
		fprintf(stderr, "usage: mkpool FILE LAYOUT SIZE\n");
		return 2;
	}
	PMEMobjpool *pop = pmemobj_create(argv[1], argv[2], strtoull(argv[3], NULL, 0), 0666);
	if (pop == NULL) {
		fprintf(stderr, "mkpool: %s\n", pmemobj_errormsg());
		return 1;
	}
	pmemobj_close(pop);
	return 0;
}
