//go:build cuda || cudaemu

// One trampoline per driver function (symbols.h): an indirect jump through its entry of
// pdq_cu_fn, which leaves every argument register and the stack as the caller set them.

.macro tramp idx, name
	.globl \name
	.type \name, @function
\name:
	jmp *(pdq_cu_fn + 8 * \idx)(%rip)
	.size \name, . - \name
.endm

#define S(i, n) tramp i, n

	.text
#include "symbols.h"

	.section .note.GNU-stack, "", @progbits
