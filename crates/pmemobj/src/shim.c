/* The C side of locsim-pmemobj: longjmp back into the program's TX_BEGIN block (setjmp's
 * partner, which stable Rust cannot call soundly). Every exported entry point is Rust's
 * (src/hooks.rs, src/lib.rs), so that the shared library exports them all. */
#include <setjmp.h>

void locsim_longjmp(void *env, int val)
{
	longjmp(*(jmp_buf *)env, val);
}
