/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The Prometheus text exposition format (version 0.0.4) of a report:
 * HELP and TYPE lines, base units, _total counters, label values escaped.
 * Pure: no I/O but the buffer it returns.
 */
#ifndef TW_EXPO_H
#define TW_EXPO_H

#include <stddef.h>
#include <stdio.h>
#include "controller/report.h"

/* The le bounds of tailwarden_request_duration_seconds, in seconds (+Inf implied). */
extern const double expo_latency_le_s[];
extern const size_t expo_latency_n_le;

/*
 * Render r into a new NUL-terminated buffer (*out, free() it; *len bytes).
 * version goes into tailwarden_build_info. 0 or -ENOMEM.
 */
int expo_render(const struct report *r, const char *version, char **out, size_t *len);

/* Write v as a label value: \ " and newline escaped. */
void expo_label_value(FILE *f, const char *v);

#endif
