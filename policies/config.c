// SPDX-License-Identifier: GPL-2.0
/*
 * The main config (tailwarden.conf): its schema, value checks and
 * defaults. Lexing is in ini.c, values with units in value.c.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include "common/defaults.h"
#include "policies/config.h"
#include "policies/ini.h"
#include "policies/value.h"

#define NSEC_PER_MSEC 1000000ULL
#define PERIOD_MIN_NS (100 * NSEC_PER_MSEC)
#define PERIOD_MAX_NS (60 * TW_NSEC_PER_SEC)

enum { S_CONTROLLER };
enum {
	K_PERIOD,
	K_DRY_RUN,
	K_POLICIES_DIR,
	K_STATE_DIR,
	K_DECISION_LOG,
	K_DECISION_LOG_MAX_SIZE,
	K_CGROUP_BASE,
	K_BUS,
	K_METRICS,
	K_IO_SCHEDULER,
	K_IO_SCHEDULER_DEVICES,
	K_AVOID_SERVICE_CPUS
};

/* Is path dir itself or beneath it, component-wise ("/etc" holds "/etc/x", not "/etcx")? */
static bool path_under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	return !strncmp(path, dir, n) && (path[n] == '\0' || path[n] == '/');
}

/* Does path have a "." or ".." component? */
static bool has_dot_component(const char *path)
{
	for (const char *c = path; (c = strchr(c, '/')); c++) {
		size_t n = strcspn(c + 1, "/");

		if ((n == 1 && c[1] == '.') || (n == 2 && c[1] == '.' && c[2] == '.'))
			return true;
	}
	return false;
}

/*
 * The system's own directories: a state directory there would put our
 * files among the system's (and the decision log could overwrite one).
 * "/lib" stands for /lib, /lib32, /lib64, /libx32.
 */
static const char *const system_dirs[] = { "/etc",  "/usr",  "/bin", "/sbin", "/lib",
					   "/boot", "/proc", "/sys", "/dev" };

static const char *system_dir_of(const char *path, bool beneath)
{
	for (size_t i = 0; i < sizeof(system_dirs) / sizeof(*system_dirs); i++) {
		const char *d = system_dirs[i];
		size_t n = strlen(d);

		if (!strcmp(d, "/lib") && !strncmp(path, "/lib", 4)) {
			n += strcspn(path + 4, "/");
			if (beneath || path[n] == '\0')
				return "/lib*";
			continue;
		}
		if (beneath ? path_under(path, d) : !strcmp(path, d))
			return d;
	}
	return NULL;
}

/* Absolute, no control characters, no "." or "..", no trailing '/' (a file's path has none at all). */
static int set_path(char **dst, const char *v, bool file, char *why)
{
	size_t n = strlen(v);

	if (*v != '/')
		return value_fail(why, "expected an absolute path (starting with /)");
	if (value_has_control(v))
		return value_fail(why, "control characters are not allowed in a path");
	if (has_dot_component(v))
		return value_fail(why, "'.' and '..' components are not allowed in a path");
	if (file && v[n - 1] == '/')
		return value_fail(why, "names a directory; expected a file");
	while (n > 1 && v[n - 1] == '/')
		n--;
	free(*dst);
	*dst = strndup(v, n);
	return *dst ? 0 : -ENOMEM;
}

static int set_period(void *obj, const char *v, char *why)
{
	return value_parse_duration_in(v, PERIOD_MIN_NS, PERIOD_MAX_NS,
				       &((struct tw_config *)obj)->period_ns, why);
}

static int set_dry_run(void *obj, const char *v, char *why)
{
	return value_parse_bool(v, &((struct tw_config *)obj)->dry_run, why);
}

static int set_avoid_service_cpus(void *obj, const char *v, char *why)
{
	return value_parse_bool(v, &((struct tw_config *)obj)->avoid_service_cpus, why);
}

static int set_policies_dir(void *obj, const char *v, char *why)
{
	return set_path(&((struct tw_config *)obj)->policies_dir, v, false, why);
}

static int set_state_dir(void *obj, const char *v, char *why)
{
	char **dst = &((struct tw_config *)obj)->state_dir;
	int r = set_path(dst, v, false, why);

	if (r)
		return r;
	if (!strcmp(*dst, "/") || !strcmp(*dst, "/var") || system_dir_of(*dst, false))
		return value_fail(
			why,
			"a system directory; use a directory of tailwarden's own, such as " TW_STATE_DIR);
	return 0;
}

/*
 * Not among the system's files, and not something that is not a file:
 * the log is appended to, as root. (The one look at the file system a
 * config check makes.)
 */
static int set_decision_log(void *obj, const char *v, char *why)
{
	char **dst = &((struct tw_config *)obj)->decision_log;
	const char *sys;
	struct stat st;
	int r = set_path(dst, v, true, why);

	if (r)
		return r;
	sys = system_dir_of(*dst, true);
	if (sys)
		return value_fail(
			why,
			"is under %s, a system directory; use a file of tailwarden's own, such as " TW_STATE_DIR
			"/decisions.jsonl",
			sys);
	if (lstat(*dst, &st) == 0 && !S_ISREG(st.st_mode))
		return value_fail(why, "exists and is %s; expected a regular file (or none yet)",
				  S_ISDIR(st.st_mode)  ? "a directory" :
				  S_ISLNK(st.st_mode)  ? "a symbolic link" :
				  S_ISFIFO(st.st_mode) ? "a FIFO" :
				  S_ISSOCK(st.st_mode) ? "a socket" :
							 "a device");
	return 0;
}

/* DecisionLogMaxSize=: a size of at least 1K; 0 or infinity for no limit. */
static int set_decision_log_max_size(void *obj, const char *v, char *why)
{
	uint64_t *max = &((struct tw_config *)obj)->decision_log_max_size;
	int r;

	if (!strcmp(v, "infinity")) {
		*max = 0;
		return 0;
	}
	r = value_parse_size(v, max, why);
	if (r == 0 && *max && *max < 1024)
		return value_fail(why, "below the minimum of 1K (0 or infinity: no limit)");
	return r;
}

/* The cgroup file system's mount point or a directory beneath it. */
static int set_cgroup_base(void *obj, const char *v, char *why)
{
	char **dst = &((struct tw_config *)obj)->cgroup_base;
	int r = set_path(dst, v, false, why);

	if (r)
		return r;
	if (!path_under(*dst, TW_CGROUP_BASE))
		return value_fail(why, "is not under " TW_CGROUP_BASE
				       ", where cgroup file systems are mounted");
	return 0;
}

static int set_bus(void *obj, const char *v, char *why)
{
	static const char *const names[] = { [CONFIG_BUS_AUTO] = "auto",
					     [CONFIG_BUS_SYSTEM] = "system",
					     [CONFIG_BUS_USER] = "user" };

	for (int i = 0; i < 3; i++)
		if (!strcmp(v, names[i])) {
			((struct tw_config *)obj)->bus = i;
			return 0;
		}
	return value_fail(why, "'%s' is not one of auto, system, user", v);
}

int config_parse_address(const char *address, struct sockaddr_storage *ss, unsigned *len)
{
	char host[64];
	const char *colon = strrchr(address, ':');
	char *end;
	unsigned long port;
	size_t hl;

	if (!colon || colon == address)
		return -EINVAL;
	port = strtoul(colon + 1, &end, 10);
	if (!colon[1] || *end || port < 1 || port > 65535 || colon[1] == '+' || colon[1] == '-')
		return -EINVAL;
	hl = colon - address;
	memset(ss, 0, sizeof(*ss));
	if (address[0] == '[') {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

		if (hl < 3 || address[hl - 1] != ']' || hl - 2 >= sizeof(host))
			return -EINVAL;
		memcpy(host, address + 1, hl - 2);
		host[hl - 2] = '\0';
		if (inet_pton(AF_INET6, host, &s6->sin6_addr) != 1)
			return -EINVAL;
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		*len = sizeof(*s6);
		return 0;
	}
	if (hl >= sizeof(host))
		return -EINVAL;
	memcpy(host, address, hl);
	host[hl] = '\0';
	{
		struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

		if (inet_pton(AF_INET, host, &s4->sin_addr) != 1)
			return -EINVAL;
		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		*len = sizeof(*s4);
	}
	return 0;
}

/* Metrics=ADDRESS:PORT or no. */
static int set_metrics(void *obj, const char *v, char *why)
{
	struct tw_config *c = obj;
	struct sockaddr_storage ss;
	unsigned len;
	bool on;

	free(c->metrics);
	c->metrics = NULL;
	c->metrics_set = true;
	if (!value_parse_bool(v, &on, why) && !on)
		return 0;
	if (config_parse_address(v, &ss, &len))
		return value_fail(why, "'%s' is not IPV4:PORT, [IPV6]:PORT or no", v);
	c->metrics = strdup(v);
	return c->metrics ? 0 : -ENOMEM;
}

/* IOScheduler=bfq; left out: never touch a disk's scheduler. */
static int set_io_scheduler(void *obj, const char *v, char *why)
{
	struct tw_config *c = obj;

	free(c->io_scheduler);
	c->io_scheduler = NULL;
	if (strcmp(v, "bfq"))
		return value_fail(
			why,
			"'%s' is not supported; only bfq (the scheduler I/O weight acts through); leave the key out to never switch",
			v);
	c->io_scheduler = strdup(v);
	return c->io_scheduler ? 0 : -ENOMEM;
}

static void free_names(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* A block device's name as in /sys/block: [a-z0-9_-], 1..31 characters. */
static bool device_name(const char *v, size_t n)
{
	if (!n || n > 31)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((v[i] >= 'a' && v[i] <= 'z') || (v[i] >= '0' && v[i] <= '9') || v[i] == '_' ||
		      v[i] == '-'))
			return false;
	return true;
}

/* IOSchedulerDevices=vda sdb: names of /sys/block. */
static int set_io_scheduler_devices(void *obj, const char *v, char *why)
{
	struct tw_config *c = obj;
	char **names = NULL;
	size_t n = 0;

	for (const char *p = v;;) {
		size_t len;
		char **nv;

		p += strspn(p, " \t");
		if (!*p)
			break;
		len = strcspn(p, " \t");
		if (!device_name(p, len)) {
			free_names(names);
			return value_fail(
				why,
				"'%.*s' is not a block device's name as in /sys/block (such as vda or nvme0n1)",
				(int)(len > 64 ? 64 : len), p);
		}
		nv = realloc(names, (n + 2) * sizeof(*names));
		if (!nv) {
			free_names(names);
			return -ENOMEM;
		}
		names = nv;
		names[n + 1] = NULL;
		if (!(names[n] = strndup(p, len))) {
			free_names(names);
			return -ENOMEM;
		}
		n++;
		p += len;
	}
	free_names(c->io_scheduler_devices);
	c->io_scheduler_devices = names;
	return 0;
}

static const char *const config_sections[] = { "Controller" };

// clang-format off
static const struct ini_key config_keys[] = {
	[K_PERIOD] = { S_CONTROLLER, "Period", "a duration from 100ms to 60s", set_period },
	[K_DRY_RUN] = { S_CONTROLLER, "DryRun", "yes or no", set_dry_run },
	[K_POLICIES_DIR] = { S_CONTROLLER, "PoliciesDir", "an absolute path", set_policies_dir },
	[K_STATE_DIR] = { S_CONTROLLER, "StateDir", "an absolute path", set_state_dir },
	[K_DECISION_LOG] = { S_CONTROLLER, "DecisionLog", "an absolute file path", set_decision_log },
	[K_DECISION_LOG_MAX_SIZE] = { S_CONTROLLER, "DecisionLogMaxSize", "a size such as 16M, or infinity",
				      set_decision_log_max_size },
	[K_CGROUP_BASE] = { S_CONTROLLER, "CgroupBase", "an absolute path", set_cgroup_base },
	[K_BUS] = { S_CONTROLLER, "Bus", "auto, system or user", set_bus },
	[K_METRICS] = { S_CONTROLLER, "Metrics", "IPV4:PORT, [IPV6]:PORT or no", set_metrics },
	[K_IO_SCHEDULER] = { S_CONTROLLER, "IOScheduler", "bfq", set_io_scheduler },
	[K_IO_SCHEDULER_DEVICES] = { S_CONTROLLER, "IOSchedulerDevices", "block device names such as vda",
				     set_io_scheduler_devices },
	[K_AVOID_SERVICE_CPUS] = { S_CONTROLLER, "AvoidServiceCPUs", "yes or no", set_avoid_service_cpus },
};
// clang-format on

_Static_assert(sizeof(config_keys) / sizeof(*config_keys) <= INI_MAX_KEYS,
	       "INI_MAX_KEYS too small for the config schema");

const struct ini_schema config_schema = {
	.sections = config_sections,
	.nsections = sizeof(config_sections) / sizeof(*config_sections),
	.keys = config_keys,
	.nkeys = sizeof(config_keys) / sizeof(*config_keys),
	.other = &policy_schema,
	.what = "the main config (tailwarden.conf)",
};

void config_free(struct tw_config *c)
{
	if (!c)
		return;
	free(c->file);
	free(c->policies_dir);
	free(c->state_dir);
	free(c->decision_log);
	free(c->cgroup_base);
	free(c->metrics);
	free(c->io_scheduler);
	free_names(c->io_scheduler_devices);
	free(c);
}

static int config_read(struct tw_config *c, const char *path, struct policy_errors *errs)
{
	struct ini_seen seen = { 0 };
	struct file_errs fe;
	char *data;
	size_t len;
	int r;

	file_errs_init(&fe, errs, path);
	r = ini_read_file(&fe, path, &data, &len);
	if (r < 0 || !data)
		return r;
	r = ini_parse_buffer(data, len, &config_schema, c, &seen, &fe);
	free(data);
	file_errs_sort(&fe);
	return r;
}

/* Defaults for what the file left out; the decision log follows StateDir=. */
static int config_defaults(struct tw_config *c)
{
	if (!c->policies_dir && !(c->policies_dir = strdup(TW_POLICIES_DIR)))
		return -ENOMEM;
	if (!c->state_dir && !(c->state_dir = strdup(TW_STATE_DIR)))
		return -ENOMEM;
	if (!c->cgroup_base && !(c->cgroup_base = strdup(TW_CGROUP_BASE)))
		return -ENOMEM;
	if (!c->metrics_set && !(c->metrics = strdup(TW_METRICS_ADDRESS)))
		return -ENOMEM;
	if (!c->decision_log && asprintf(&c->decision_log, "%s/decisions.jsonl",
					 strcmp(c->state_dir, "/") ? c->state_dir : "") < 0) {
		c->decision_log = NULL;
		return -ENOMEM;
	}
	return 0;
}

int config_load(const char *path, struct tw_config **out, struct policy_errors *errs)
{
	struct tw_config *c;
	size_t err0 = errs->n;
	int r = 0;

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->period_ns = TW_PERIOD_NS;
	c->decision_log_max_size = TW_DECISION_LOG_MAX_SIZE;
	if (path) {
		c->file = strdup(path);
		r = c->file ? config_read(c, path, errs) : -ENOMEM;
	}
	if (r == 0)
		r = config_defaults(c);
	if (r == 0 && errs->n > err0)
		r = -EINVAL;
	if (r < 0) {
		config_free(c);
		return r;
	}
	*out = c;
	return 0;
}

int config_describe(const struct tw_config *c, char *buf, size_t len)
{
	char period[32], max[32], io[128] = "";
	size_t o = 0;

	value_format_duration(c->period_ns, period, sizeof(period));
	value_format_size(c->decision_log_max_size, max, sizeof(max));
	if (c->io_scheduler) {
		o = snprintf(io, sizeof(io), ", I/O scheduler %s on ", c->io_scheduler);
		for (size_t i = 0;
		     c->io_scheduler_devices && c->io_scheduler_devices[i] && o < sizeof(io); i++)
			o += snprintf(io + o, sizeof(io) - o, "%s%s", i ? " " : "",
				      c->io_scheduler_devices[i]);
		if (!c->io_scheduler_devices || !c->io_scheduler_devices[0])
			snprintf(io + o, sizeof(io) - o, "the disks");
	}
	return snprintf(
		buf, len,
		"%s: period %s, dry-run %s, policies %s, state %s, decision log %s (max %s), cgroup base %s, metrics %s%s%s",
		c->file ? c->file : "(defaults)", period, c->dry_run ? "yes" : "no",
		c->policies_dir, c->state_dir, c->decision_log,
		c->decision_log_max_size ? max : "infinity", c->cgroup_base,
		c->metrics ? c->metrics : "no", io,
		c->avoid_service_cpus ? ", off the latency-critical services' CPUs" : "");
}
