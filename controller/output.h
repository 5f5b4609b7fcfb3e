/* SPDX-License-Identifier: GPL-2.0 */
/* Rendering QoS samples: JSON Lines objects and table rows. */
#ifndef TW_OUTPUT_H
#define TW_OUTPUT_H

#include <stdio.h>
#include <json-c/json.h>
#include "sensing/diagnosis.h"
#include "sensing/sensor.h"

/*
 * One sample as the documented JSON object (see docs/commands.md, "--json").
 * path may be NULL (cgroup removed before it could be named). NULL on ENOMEM.
 */
struct json_object *output_sample_json(const struct qos_sample *s, const char *path, double ts,
				       const struct sensor_drops *drops);
/*
 * Add the contention signals (each null when unavailable, all null when
 * c is NULL) and the diagnosis (null when d is NULL) to a sample's object.
 */
void output_contention_json(struct json_object *o, const struct contention_sample *c,
			    const struct diagnosis *d);
/* Write obj as one line to f and release it. 0 or -EIO. */
int output_json_line(FILE *f, struct json_object *obj);

/* Table header and one row for `top`; c and d may be NULL (no contention sensor). */
void output_table_header(FILE *f);
void output_table_row(FILE *f, const struct qos_sample *s, const char *path,
		      const struct contention_sample *c, const struct diagnosis *d);
/* "312us", "1.27ms", "2.10s", or "-" for negative (no data). */
void output_fmt_duration(char *buf, size_t len, double ns);
/* "0", "812", "12.3K", "4.5M", "1.2G" per second. */
void output_fmt_rate(char *buf, size_t len, double per_s);

#endif
