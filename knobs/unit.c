// SPDX-License-Identifier: GPL-2.0
/*
 * Unit= policies through sd-bus. We talk to the manager with plain method
 * calls (GetUnit, Properties.GetAll, SetUnitProperties) once per tick
 * rather than following its signals: a restarted unit is seen at the next
 * tick at the latest, which is as soon as the control loop could act on
 * it anyway, and there is no subscription to lose across a daemon-reexec.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include "knobs/record.h"
#include "knobs/unit.h"

#define SD_DEST "org.freedesktop.systemd1"
#define SD_PATH "/org/freedesktop/systemd1"
#define SD_MANAGER "org.freedesktop.systemd1.Manager"
#define CALL_TIMEOUT_USEC (2 * 1000000ULL)
#define WEIGHT_DEFAULT 100.0

struct unit_bus {
	sd_bus *bus;
	const char *name;
	char *address;
};

static const char *const props[KNOB_MAX] = {
	[KNOB_CPU_QUOTA] = "CPUQuotaPerSecUSec",
	[KNOB_CPU_WEIGHT] = "CPUWeight",
	[KNOB_IO_WEIGHT] = "IOWeight",
};

const char *unit_property(enum action_knob kind)
{
	return kind >= 0 && kind < KNOB_MAX ? props[kind] : NULL;
}

double unit_raw_to_value(enum action_knob kind, uint64_t raw)
{
	if (kind == KNOB_CPU_QUOTA)
		return raw == UINT64_MAX ? INFINITY : raw / 1e6;
	return raw == UINT64_MAX ? WEIGHT_DEFAULT : (double)raw;
}

uint64_t unit_value_to_raw(enum action_knob kind, double value)
{
	if (!isfinite(value))
		return UINT64_MAX;
	return (uint64_t)llround(kind == KNOB_CPU_QUOTA ? value * 1e6 : value);
}

/* systemd's answer as -errno: its error names carry no errno for us. */
static int bus_errno(const sd_bus_error *e, int r)
{
	if (sd_bus_error_has_name(e, "org.freedesktop.systemd1.NoSuchUnit") ||
	    sd_bus_error_has_name(e, "org.freedesktop.systemd1.LoadFailed"))
		return -ENOENT;
	if (sd_bus_error_has_name(e, SD_BUS_ERROR_SERVICE_UNKNOWN) ||
	    sd_bus_error_has_name(e, SD_BUS_ERROR_NAME_HAS_NO_OWNER))
		return -EHOSTUNREACH;
	if (r == -ECONNRESET || r == -EPIPE || r == -ESHUTDOWN)
		return -ENOTCONN;
	return r < 0 ? r : -EIO;
}

static char why_buf[512];

static int connect_bus(enum config_bus kind, const char *address, struct unit_bus *b)
{
	int r;

	if (address) {
		b->name = !strncmp(address, "unix:path=/run/dbus/", 20) ? "system bus" : "user bus";
		r = sd_bus_new(&b->bus);
		if (r < 0)
			return r;
		r = sd_bus_set_address(b->bus, address);
		if (r >= 0)
			r = sd_bus_set_bus_client(b->bus, 1);
		if (r >= 0)
			r = sd_bus_start(b->bus);
		return r;
	}
	if (kind == CONFIG_BUS_AUTO)
		kind = getenv("DBUS_SESSION_BUS_ADDRESS") ? CONFIG_BUS_USER : CONFIG_BUS_SYSTEM;
	b->name = kind == CONFIG_BUS_USER ? "user bus" : "system bus";
	return kind == CONFIG_BUS_USER ? sd_bus_open_user(&b->bus) : sd_bus_open_system(&b->bus);
}

int unit_bus_open(enum config_bus kind, const char *address, struct unit_bus **out,
		  const char **why)
{
	sd_bus_error err = SD_BUS_ERROR_NULL;
	struct unit_bus *b = calloc(1, sizeof(*b));
	const char *a = NULL;
	int r;

	if (!b)
		return -ENOMEM;
	r = connect_bus(kind, address, b);
	if (r >= 0)
		r = sd_bus_set_method_call_timeout(b->bus, CALL_TIMEOUT_USEC);
	/* Ask the manager itself, so "connected" means "systemd answers". */
	if (r >= 0)
		r = sd_bus_call_method(b->bus, SD_DEST, SD_PATH, "org.freedesktop.DBus.Peer",
				       "Ping", &err, NULL, "");
	if (r >= 0 && sd_bus_get_address(b->bus, &a) >= 0 && a)
		b->address = strdup(a);
	if (r < 0) {
		snprintf(why_buf, sizeof(why_buf), "cannot reach systemd on the %s%s%s: %s",
			 b->name ? b->name : "bus", address ? " at " : "", address ? address : "",
			 err.message ? err.message : strerror(-r));
		r = bus_errno(&err, r);
	}
	sd_bus_error_free(&err);
	if (why)
		*why = why_buf;
	if (r < 0) {
		unit_bus_free(b);
		return r;
	}
	*out = b;
	return 0;
}

void unit_bus_free(struct unit_bus *b)
{
	if (!b)
		return;
	sd_bus_flush_close_unref(b->bus);
	free(b->address);
	free(b);
}

const char *unit_bus_name(const struct unit_bus *b)
{
	return b->name;
}

const char *unit_bus_address(const struct unit_bus *b)
{
	return b->address ? b->address : "";
}

int unit_link_connect(struct unit_link *l, enum config_bus kind, uint64_t now_usec,
		      uint64_t retry_usec)
{
	const char *why = NULL;
	int r;

	if (l->bus || now_usec < l->retry_usec)
		return 0;
	l->retry_usec = now_usec + retry_usec;
	r = unit_bus_open(kind, NULL, &l->bus, &why);
	if (r) {
		snprintf(l->why, sizeof(l->why), "%s", why ? why : strerror(-r));
		return r;
	}
	l->why[0] = '\0';
	return 1;
}

int unit_link_get(struct unit_link *l, const char *unit, struct unit_props *out)
{
	int r;

	if (!l->bus)
		return -ENOTCONN;
	r = unit_get(l->bus, unit, out);
	if (r != -ENOTCONN && r != -EHOSTUNREACH)
		return r;
	snprintf(l->why, sizeof(l->why), "the connection to systemd on the %s was lost",
		 unit_bus_name(l->bus));
	unit_link_close(l);
	return -ENOTCONN;
}

void unit_link_close(struct unit_link *l)
{
	unit_bus_free(l->bus);
	l->bus = NULL;
}

/* The D-Bus interface that carries a unit type's cgroup properties. */
static const char *unit_interface(const char *unit)
{
	const char *dot = strrchr(unit, '.');

	if (dot && !strcmp(dot, ".slice"))
		return "org.freedesktop.systemd1.Slice";
	if (dot && !strcmp(dot, ".scope"))
		return "org.freedesktop.systemd1.Scope";
	return "org.freedesktop.systemd1.Service";
}

static int read_string(sd_bus_message *m, char *buf, size_t len)
{
	const char *s;
	int r = sd_bus_message_read(m, "v", "s", &s);

	if (r >= 0)
		snprintf(buf, len, "%s", s);
	return r;
}

/* One entry of an a{sv}: the ones we want, the rest skipped. */
static int read_prop(sd_bus_message *m, const char *name, struct unit_props *out)
{
	for (int k = 0; k < KNOB_MAX; k++)
		if (props[k] && !strcmp(name, props[k]))
			return sd_bus_message_read(m, "v", "t", &out->raw[k]);
	if (!strcmp(name, "ControlGroup"))
		return read_string(m, out->cgroup, sizeof(out->cgroup));
	if (!strcmp(name, "ActiveState"))
		return read_string(m, out->active, sizeof(out->active));
	return sd_bus_message_skip(m, "v");
}

static int read_props(sd_bus_message *reply, struct unit_props *out)
{
	int r;

	r = sd_bus_message_enter_container(reply, 'a', "{sv}");
	while (r >= 0 && (r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
		const char *name;

		r = sd_bus_message_read(reply, "s", &name);
		if (r >= 0)
			r = read_prop(reply, name, out);
		if (r >= 0)
			r = sd_bus_message_exit_container(reply);
	}
	if (r >= 0)
		r = sd_bus_message_exit_container(reply);
	return r;
}

static int get_props(struct unit_bus *b, const char *path, const char *iface,
		     struct unit_props *out, sd_bus_error *err)
{
	sd_bus_message *reply = NULL;
	int r;

	r = sd_bus_call_method(b->bus, SD_DEST, path, "org.freedesktop.DBus.Properties", "GetAll",
			       err, &reply, "s", iface);
	if (r >= 0)
		r = read_props(reply, out);
	sd_bus_message_unref(reply);
	return r;
}

int unit_get(struct unit_bus *b, const char *unit, struct unit_props *out)
{
	sd_bus_error err = SD_BUS_ERROR_NULL;
	sd_bus_message *reply = NULL;
	const char *path;
	char *p = NULL;
	int r;

	memset(out, 0, sizeof(*out));
	for (int k = 0; k < KNOB_MAX; k++)
		out->raw[k] = UINT64_MAX;
	/* GetUnit, not LoadUnit: a unit that is gone must not be loaded again by us. */
	r = sd_bus_call_method(b->bus, SD_DEST, SD_PATH, SD_MANAGER, "GetUnit", &err, &reply, "s",
			       unit);
	if (r >= 0)
		r = sd_bus_message_read(reply, "o", &path);
	if (r >= 0 && !(p = strdup(path)))
		r = -ENOMEM;
	sd_bus_message_unref(reply);
	/* ActiveState is on the Unit interface; the cgroup and knobs on the type's. */
	if (r >= 0)
		r = get_props(b, p, "org.freedesktop.systemd1.Unit", out, &err);
	if (r >= 0)
		r = get_props(b, p, unit_interface(unit), out, &err);
	free(p);
	if (r < 0)
		r = bus_errno(&err, r);
	sd_bus_error_free(&err);
	return r < 0 ? r : 0;
}

int unit_set(struct unit_bus *b, const char *unit, enum action_knob kind, uint64_t raw)
{
	sd_bus_error err = SD_BUS_ERROR_NULL;
	const char *prop = unit_property(kind);
	int r;

	if (!prop)
		return -EOPNOTSUPP;
	r = sd_bus_call_method(b->bus, SD_DEST, SD_PATH, SD_MANAGER, "SetUnitProperties", &err,
			       NULL, "sba(sv)", unit, 1, 1, prop, "t", raw);
	if (r < 0)
		r = bus_errno(&err, r);
	sd_bus_error_free(&err);
	return r < 0 ? r : 0;
}

/* ---- the backend of Unit= knobs (record.h) ---- */

static int unit_rec(const struct knob_target *t, enum action_knob kind, struct knob_record *r)
{
	struct unit_props p;
	int ret;

	if (!t->bus)
		return -ENOTCONN;
	if (!unit_property(kind))
		return -EOPNOTSUPP;
	ret = unit_get(t->bus, t->unit, &p);
	if (ret)
		return ret;
	r->unit.unit = strdup(t->unit);
	r->unit.property = strdup(unit_property(kind));
	r->unit.bus = strdup(unit_bus_address(t->bus));
	r->unit.value = p.raw[kind];
	return r->unit.unit && r->unit.property && r->unit.bus ? 0 : -ENOMEM;
}

static int unit_wr(const struct knob_target *t, const struct knob_env *env, struct knob_record *r,
		   double value, const char *sval)
{
	(void)env;
	(void)sval;
	if (!t->bus)
		return -ENOTCONN;
	return unit_set(t->bus, t->unit, r->knob, unit_value_to_raw(r->knob, value));
}

static int unit_written(const struct knob_target *t, struct knob_record *r, double value,
			const char *sval)
{
	(void)t;
	(void)sval;
	r->unit.written = unit_value_to_raw(r->knob, value);
	r->unit.has_written = true;
	r->written = unit_raw_to_value(r->knob, r->unit.written);
	r->has_written = true;
	return 0;
}

static enum action_knob unit_kind(const struct knob_record *r)
{
	for (int k = 0; k < KNOB_MAX; k++)
		if (unit_property(k) && !strcmp(unit_property(k), r->unit.property))
			return k;
	return KNOB_MAX;
}

/* The bus the record was made on; no bus is not "unit gone". */
static int unit_rec_bus(const struct knob_record *r, struct unit_bus **b, char *why, size_t whylen)
{
	const char *msg = NULL;
	int ret;

	if (unit_kind(r) == KNOB_MAX) {
		snprintf(why, whylen, "\"%s\" is not a property tailwarden sets", r->unit.property);
		return -EBADMSG;
	}
	ret = unit_bus_open(CONFIG_BUS_AUTO, *r->unit.bus ? r->unit.bus : NULL, b, &msg);
	if (ret) {
		snprintf(why, whylen, "%s", msg ? msg : strerror(-ret));
		return ret == -ENOENT ? -ECONNREFUSED : ret;
	}
	return 0;
}

/* The property still what we set, or already back; else an administrator's (set-property) now. */
static int unit_verify(const struct knob_env *env, struct knob_record *r, char *why, size_t whylen)
{
	struct unit_props p;
	struct unit_bus *b;
	enum action_knob k = unit_kind(r);
	int ret;

	(void)env;
	if (why && whylen)
		*why = '\0';
	ret = unit_rec_bus(r, &b, why, whylen);
	if (ret)
		return ret;
	ret = unit_get(b, r->unit.unit, &p);
	unit_bus_free(b);
	if (ret == -ENOENT)
		return ret;
	if (ret) {
		snprintf(why, whylen, "reading %s of %s: %s", r->unit.property, r->unit.unit,
			 strerror(-ret));
		return ret;
	}
	if (r->unit.has_written && p.raw[k] != r->unit.written && p.raw[k] != r->unit.value) {
		char now[32], ours[32];

		snprintf(now, sizeof(now), "%llu", (unsigned long long)p.raw[k]);
		snprintf(ours, sizeof(ours), "%llu", (unsigned long long)r->unit.written);
		snprintf(why, whylen, "%s %s is %s, we set %s", r->unit.unit, r->unit.property,
			 p.raw[k] == UINT64_MAX ? "not set" : now,
			 r->unit.written == UINT64_MAX ? "not set" : ours);
		return -ESTALE;
	}
	return 0;
}

static int unit_restore(const struct knob_env *env, struct knob_record *r, knob_report_fn fn,
			void *userdata, char *why, size_t whylen)
{
	struct unit_bus *b;
	char line[512];
	int ret;

	(void)env;
	ret = unit_rec_bus(r, &b, why, whylen);
	if (ret)
		return ret;
	ret = unit_set(b, r->unit.unit, unit_kind(r), r->unit.value);
	unit_bus_free(b);
	if (ret) {
		if (ret != -ENOENT)
			snprintf(why, whylen, "SetUnitProperties(%s, %s): %s", r->unit.unit,
				 r->unit.property, strerror(-ret));
		return ret;
	}
	if (r->unit.value == UINT64_MAX)
		snprintf(line, sizeof(line), "%s %s: reset (not set)", r->unit.unit,
			 r->unit.property);
	else
		snprintf(line, sizeof(line), "%s %s: %llu", r->unit.unit, r->unit.property,
			 (unsigned long long)r->unit.value);
	if (fn)
		fn(userdata, line);
	return 0;
}

const struct knob_backend knob_backend_unit = {
	.describe = "systemd unit properties",
	.record = unit_rec,
	.write = unit_wr,
	.written = unit_written,
	.verify = unit_verify,
	.restore = unit_restore,
};
