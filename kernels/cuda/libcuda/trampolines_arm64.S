//go:build cuda || cudaemu

// One trampoline per driver function (symbols.h): an indirect branch through its entry of
// pdq_cu_fn, which leaves every argument register and the stack as the caller set them.

.macro tramp idx, name
	.globl \name
	.type \name, %function
\name:
	adrp x16, pdq_cu_fn + 8 * \idx
	ldr x16, [x16, #:lo12:pdq_cu_fn + 8 * \idx]
	br x16
	.size \name, . - \name
.endm

#define S(i, n) tramp i, n

	.text
#include "symbols.h"

	.section .note.GNU-stack, "", %progbits
