/* SPDX-License-Identifier: GPL-2.0 */
/* The fuzzers' invariant: a failed one aborts, which libFuzzer keeps as a crash. */
#ifndef TAILWARDEN_FUZZ_CHECK_H
#define TAILWARDEN_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define check(cond)                                                                          \
	do {                                                                                 \
		if (!(cond)) {                                                               \
			fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, \
				#cond);                                                      \
			abort();                                                             \
		}                                                                            \
	} while (0)

#endif
