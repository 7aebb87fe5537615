/* lib.cl and kern.cl as one translation unit, callees kept out of line: LLVM's own totals. */
#define LINK_AMD_NOINLINE __attribute__((noinline))
#include "lib.cl"
#include "kern.cl"
