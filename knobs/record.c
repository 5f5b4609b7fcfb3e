// SPDX-License-Identifier: GPL-2.0
/*
 * Typed records of the changes we made (record.h): freeing them, naming
 * them, the table of backends that make and undo each kind, and what a
 * target's knob is called and holds now.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "knobs/knob.h"
#include "knobs/record.h"
#include "knobs/unit.h"

void knob_record_free(struct knob_record *r)
{
	if (!r)
		return;
	free(r->cgroup_base);
	free(r->cgroup);
	switch (r->backend) {
	case KNOB_BACKEND_CGROUP:
		for (size_t i = 0; i < r->files.n; i++) {
			free(r->files.v[i].path);
			free(r->files.v[i].value);
			free(r->files.v[i].written);
		}
		free(r->files.v);
		break;
	case KNOB_BACKEND_CPUFREQ:
		free(r->cpus.v);
		break;
	case KNOB_BACKEND_SLICE:
		free(r->threads.v);
		break;
	case KNOB_BACKEND_UNIT:
		free(r->unit.unit);
		free(r->unit.property);
		free(r->unit.bus);
		break;
	case KNOB_BACKEND_IOSCHED:
		free(r->iosched.device);
		free(r->iosched.original);
		free(r->iosched.written);
		break;
	case KNOB_BACKEND_SUBTREE:
		free(r->subtree.controller);
		free(r->subtree.original);
		break;
	default:
		break;
	}
	memset(r, 0, sizeof(*r));
}

void knob_record_unwritten(struct knob_record *r)
{
	r->has_written = false;
	switch (r->backend) {
	case KNOB_BACKEND_CGROUP:
		for (size_t i = 0; i < r->files.n; i++) {
			free(r->files.v[i].written);
			r->files.v[i].written = NULL;
		}
		break;
	case KNOB_BACKEND_CPUFREQ:
		for (size_t i = 0; i < r->cpus.n; i++)
			r->cpus.v[i].written_khz = 0;
		break;
	case KNOB_BACKEND_UNIT:
		r->unit.has_written = false;
		break;
	case KNOB_BACKEND_IOSCHED:
		free(r->iosched.written);
		r->iosched.written = NULL;
		break;
	default: /* a slice's threads each keep theirs; a controller has none */
		break;
	}
}

const char *knob_record_who(const struct knob_record *r)
{
	if (r->backend == KNOB_BACKEND_UNIT)
		return r->unit.unit;
	if (r->backend == KNOB_BACKEND_IOSCHED)
		return r->iosched.device;
	return r->cgroup;
}

const char *knob_record_knob_name(const struct knob_record *r)
{
	if (r->backend == KNOB_BACKEND_IOSCHED)
		return "io.scheduler";
	if (r->backend == KNOB_BACKEND_SUBTREE)
		return "cgroup.subtree_control";
	return action_knob_name(r->knob);
}

const struct knob_backend *knob_backend_of(enum knob_backend_id id)
{
	static const struct knob_backend *const table[KNOB_BACKEND_MAX] = {
		[KNOB_BACKEND_CGROUP] = &knob_backend_cgroup,
		[KNOB_BACKEND_CPUFREQ] = &knob_backend_cpufreq,
		[KNOB_BACKEND_UNIT] = &knob_backend_unit,
		[KNOB_BACKEND_SLICE] = &knob_backend_slice,
		[KNOB_BACKEND_IOSCHED] = &knob_backend_iosched,
		[KNOB_BACKEND_SUBTREE] = &knob_backend_subtree,
	};

	return id < KNOB_BACKEND_MAX ? table[id] : NULL;
}

const char *knob_target_name(const struct knob_target *t, enum action_knob kind, char *buf,
			     size_t len)
{
	if (kind == KNOB_SCHED_SLICE)
		snprintf(buf, len, "sched.slice of the threads of %s", t->cgroup);
	else if (t->unit)
		snprintf(buf, len, "%s %s", t->unit, unit_property(kind));
	else if (t->files)
		snprintf(buf, len, "%s", knob_path(t->files, kind));
	else
		snprintf(buf, len, "%s of %s", action_knob_name(kind), t->cgroup);
	return buf;
}

int knob_target_read(const struct knob_target *t, enum action_knob kind, double *value)
{
	if (kind == KNOB_SCHED_SLICE)
		return -EOPNOTSUPP; /* per thread: what we set is the service's to know */
	if (t->unit) {
		if (!t->props)
			return -ENOTCONN;
		*value = unit_raw_to_value(kind, t->props->raw[kind]);
		return 0;
	}
	if (!t->files || !knob_available(t->files, kind, NULL))
		return -EOPNOTSUPP;
	return knob_read(t->files, kind, value);
}
