// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests for policy files and the main config (policies/policy.c,
 * ini.c, value.c): a table of good and bad files, written to a fresh
 * directory per case, each asserting the exact "FILE:LINE: message" list
 * (or the exact one-line summaries of a valid set); then the unit parsers'
 * edge cases one value at a time.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include <fcntl.h>
#include "controller/commands.h"
#include "policies/config.h"
#include "policies/policy.h"
#include "policies/value.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof(*(a)))

struct tfile {
	const char *name; /* "x.policy", "d/x.policy" (d is created), "x.conf" */
	const char *text;
	size_t len; /* 0: strlen(text) */
};

struct file_case {
	const char *title;
	bool config; /* config_load(paths[0]) instead of policy_set_load() */
	struct tfile files[4];
	const char *paths[4];	/* what is loaded; none: every file, in order */
	const char *errors[16]; /* exactly these, in this order; none: valid */
	const char *summary[4]; /* for a valid case: the describe() lines */
};

#define LC_HEAD "[Service]\nCgroup=lc.slice/web.service\nClass=latency-critical\n"
#define LC_OBJ "[Objective]\nTarget=2ms\n"
#define BE_HEAD "[Service]\nCgroup=be.slice/batch.service\nClass=best-effort\n"
#define LC_AT(cg) "[Service]\nCgroup=" cg "\nClass=latency-critical\n"

// clang-format off
static const struct file_case file_cases[] = {
	/* ---- valid policy files ---- */
	{ "the issue's sketch, trailing comments and all",
	  .files = { { "web.policy",
		       "[Service]\n"
		       "Cgroup=lc.slice/web.service     # relative to the cgroup root\n"
		       "Class=latency-critical          # or best-effort\n"
		       "[Objective]                     # latency-critical only\n"
		       "Percentile=99\n"
		       "Target=2ms\n"
		       "MinRequests=200                 # fewer in a window: no verdict, no action\n"
		       "Window=2s\n"
		       "[Limits]                        # best-effort: what may be taken; latency-critical: what may be given\n"
		       "CPUQuota=10%..200%              # of one CPU\n"
		       "CPUWeight=10..1000\n"
		       "IOWeight=10..1000\n"
		       "CPUFrequency=1.2GHz..max        # latency-critical only\n" } },
	  .summary = { "web: latency-critical /lc.slice/web.service p99 <= 2ms (window 2s, min 200 requests); "
		       "limits: CPUQuota 10%..200%, CPUWeight 10..1000, IOWeight 10..1000, CPUFrequency 1.2GHz..max" } },
	{ "Slice=: one duration, in the summary",
	  .files = { { "web.policy", LC_HEAD LC_OBJ "[Limits]\nCPUWeight=100..1000\nSlice=0.3ms\n" } },
	  .summary = { "web: latency-critical /lc.slice/web.service p99 <= 2ms (window 2s, min 200 requests); "
		       "limits: CPUWeight 100..1000, Slice 300us" } },
	{ "Weights=: floor when asked; the CPU weight's by default; reactive when asked; none without a weight",
	  .files = { { "batch.policy", BE_HEAD "[Limits]\nCPUWeight=1..100\nWeights=floor\n" },
		     { "dflt.policy", "[Service]\nCgroup=be/d\nClass=best-effort\n[Limits]\nCPUWeight=1..100\nIOWeight=10..100\n" },
		     { "quota.policy", "[Service]\nCgroup=be/q\nClass=best-effort\n[Limits]\nCPUQuota=10%..max\n" },
		     { "react.policy", "[Service]\nCgroup=be/r\nClass=best-effort\n[Limits]\nCPUWeight=1..100\nWeights=reactive\n" } },
	  .summary = { "batch: best-effort /be.slice/batch.service; limits: CPUWeight 1..100; "
		       "weights at their floor while a latency-critical service serves",
		       "dflt: best-effort /be/d; limits: CPUWeight 1..100, IOWeight 10..100; "
		       "CPU weight at its floor while a latency-critical service serves",
		       "quota: best-effort /be/q; limits: CPUQuota 10%..max",
		       "react: best-effort /be/r; limits: CPUWeight 1..100" } },
	{ "CPUWeight=: idle as the low end, or alone; its floor",
	  .files = { { "batch.policy", BE_HEAD "[Limits]\nCPUWeight=idle..100\n" },
		     { "pin.policy", "[Service]\nCgroup=be/p\nClass=best-effort\n[Limits]\nCPUWeight=idle\n" } },
	  .summary = { "batch: best-effort /be.slice/batch.service; limits: CPUWeight idle..100; "
		       "CPU weight at its floor while a latency-critical service serves",
		       "pin: best-effort /be/p; limits: CPUWeight idle; "
		       "CPU weight at its floor while a latency-critical service serves" } },
	{ "CPUWeight=: 0 is not idle, idle is not an I/O weight nor a high end",
	  .files = { { "a.policy", BE_HEAD "[Limits]\nCPUWeight=0..100\n" },
		     { "b.policy", "[Service]\nCgroup=be/b\nClass=best-effort\n[Limits]\nIOWeight=idle..100\n" },
		     { "c.policy", "[Service]\nCgroup=be/c\nClass=best-effort\n[Limits]\nCPUWeight=10..idle\n" } },
	  .errors = { "a.policy:5: CPUWeight=0..100: 0 is below the minimum of 1 (below every weight: idle)",
		      "b.policy:5: IOWeight=idle..100: expected a whole number",
		      "c.policy:5: CPUWeight=10..idle: lower bound 10 is above upper bound idle" } },
	{ "Weights=: a bad value, on a latency-critical service, floor without a weight",
	  .files = { { "a.policy", LC_AT("lc/a") LC_OBJ "[Limits]\nWeights=floor\n" },
		     { "b.policy", "[Service]\nCgroup=be/b\nClass=best-effort\n[Limits]\nCPUWeight=1..100\nWeights=low\n" },
		     { "c.policy", "[Service]\nCgroup=be/c\nClass=best-effort\n[Limits]\nCPUQuota=10%..max\nWeights=floor\n" } },
	  .errors = { "a.policy:7: Weights= is for best-effort services only (how their weights are taken); this one is latency-critical",
		      "b.policy:6: Weights=low: expected reactive or floor",
		      "c.policy:6: Weights=floor needs CPUWeight= or IOWeight= in [Limits] (the floor it holds them at)" } },
	{ "Slice=: out of the kernel's range, a range, on a best-effort service",
	  .files = { { "a.policy", LC_AT("lc/a") LC_OBJ "[Limits]\nSlice=50us\n" },
		     { "b.policy", LC_AT("lc/b") LC_OBJ "[Limits]\nSlice=200ms\n" },
		     { "c.policy", LC_AT("lc/c") LC_OBJ "[Limits]\nSlice=1ms..3ms\n" },
		     { "d.policy", BE_HEAD "[Limits]\nCPUWeight=1..100\nSlice=1ms\n" } },
	  .errors = { "a.policy:7: Slice=50us: below the minimum of 100us",
		      "b.policy:7: Slice=200ms: above the maximum of 100ms",
		      "c.policy:7: Slice=1ms..3ms: a range has no meaning here: give one duration such as 1ms (the slice while the service misses its target)",
		      "d.policy:6: Slice= is for latency-critical services only (their threads get the short slice); this one is best-effort" } },
	{ "Unit= instead of Cgroup=",
	  .files = { { "batch.policy", "[Service]\nUnit=batch@1.service\nClass=best-effort\n[Limits]\nCPUWeight=1..100\n" } },
	  .summary = { "batch: best-effort unit batch@1.service; limits: CPUWeight 1..100; "
		       "CPU weight at its floor while a latency-critical service serves" } },
	{ "defaults: p99, 200 requests, 2 s window, no limits",
	  .files = { { "web.policy", LC_HEAD LC_OBJ } },
	  .summary = { "web: latency-critical /lc.slice/web.service p99 <= 2ms (window 2s, min 200 requests); limits: none" } },
	{ "other spellings: p99.9, µs, spaces, single values, ; comments, CRLF, BOM",
	  .files = { { "api.policy",
		       "\xef\xbb\xbf; the API\r\n"
		       "[Service]\r\n"
		       "  Cgroup = //lc.slice///api.service/   \r\n"
		       "Class=latency-critical ; a comment\r\n"
		       "\r\n"
		       "[ Objective ]\r\n"
		       "Percentile=p99.9\r\n"
		       "Target=250\xc2\xb5s\r\n"
		       "MinRequests=50\r\n"
		       "Window=1.5 s\r\n"
		       "# limits\r\n"
		       "[Limits]\r\n"
		       "CPUWeight=100\r\n"
		       "CPUQuota = 50% .. max\r\n"
		       "CPUFrequency=800MHz..3.5ghz\r\n" } },
	  .summary = { "api: latency-critical /lc.slice/api.service p99.9 <= 250us (window 1.5s, min 50 requests); "
		       "limits: CPUQuota 50%..max, CPUWeight 100, CPUFrequency 800MHz..3.5GHz" } },
	{ "best-effort, leading '/', a cgroup beside (not inside) another",
	  .files = { { "a.policy", "[Service]\nCgroup=/x/b\nClass=best-effort\n[Limits]\nCPUWeight=1..10000\n" },
		     { "b.policy", "[Service]\nCgroup=x/bc\nClass=best-effort\n[Limits]\nIOWeight=10..100\n" } },
	  .summary = { "a: best-effort /x/b; limits: CPUWeight 1..10000; "
		       "CPU weight at its floor while a latency-critical service serves",
		       "b: best-effort /x/bc; limits: IOWeight 10..100" } },
	{ "a directory: *.policy only, in name order, hidden files skipped",
	  .files = { { "d/z.policy", BE_HEAD "[Limits]\nCPUQuota=1%..100000%\n" },
		     { "d/a.policy", LC_HEAD LC_OBJ },
		     { "d/.hidden.policy", "garbage" },
		     { "d/notes.txt", "garbage" } },
	  .paths = { "d" },
	  .summary = { "a: latency-critical /lc.slice/web.service p99 <= 2ms (window 2s, min 200 requests); limits: none",
		       "z: best-effort /be.slice/batch.service; limits: CPUQuota 1%..100000%" } },
	{ "a file named twice is read once",
	  .files = { { "d/a.policy", LC_HEAD LC_OBJ } },
	  .paths = { "d", "d/a.policy", "d/../d/a.policy" },
	  .summary = { "a: latency-critical /lc.slice/web.service p99 <= 2ms (window 2s, min 200 requests); limits: none" } },

	/* ---- syntax ---- */
	{ "syntax errors, all of them, each on its line",
	  .files = { { "web.policy",
		       LC_HEAD LC_OBJ
		       "this is not a key\n"
		       "[Limits\n"
		       "CPUWeight: 10..100\n"
		       "=10\n"
		       "[Limits] trailing\n"
		       "  CPUWeight = 10..100\n"
		       "\tIOWeight=5 ; an indented key is a key, not a continuation\n" } },
	  .errors = { "web.policy:6: expected 'Key=Value', '[Section]' or a comment",
		      "web.policy:7: missing ']' at the end of the section header",
		      "web.policy:8: expected '=' after 'CPUWeight', not ':'",
		      "web.policy:9: missing key name before '='",
		      "web.policy:10: unexpected text after [Limits]" } },
	{ "a key before any section",
	  .files = { { "web.policy", "Cgroup=x\n" LC_HEAD LC_OBJ } },
	  .errors = { "web.policy:1: key 'Cgroup' outside any section; it belongs in [Service]" } },
	{ "empty value",
	  .files = { { "web.policy", LC_HEAD "[Objective]\nTarget=\n" } },
	  .errors = { "web.policy:5: Target=: missing value; expected a duration such as 2ms" } },
	{ "an inline comment needs a space before it",
	  .files = { { "web.policy", LC_HEAD "[Objective]\nTarget=2ms# two\n" } },
	  .errors = { "web.policy:5: Target=2ms# two: unknown unit 'ms# two'; expected ns, us, \xc2\xb5s, ms or s" } },

	/* ---- sections and keys ---- */
	{ "unknown sections: near miss, nothing near, the config's",
	  .files = { { "web.policy",
		       LC_HEAD LC_OBJ
		       "[limit]\nX=1\n"
		       "[Frobnicate]\nY=2\n"
		       "[Controller]\nPeriod=1s\n" } },
	  .errors = { "web.policy:6: unknown section [limit]; did you mean [Limits]?",
		      "web.policy:8: unknown section [Frobnicate]; expected [Service], [Objective] or [Limits]",
		      "web.policy:10: section [Controller] belongs in the main config (tailwarden.conf), not in a policy file (*.policy)" } },
	{ "unknown keys: typo, case, fragment, other section, the config's, nothing near",
	  .files = { { "web.policy",
		       LC_HEAD LC_OBJ
		       "[Limits]\n"
		       "CPUQuotta=10%\n"
		       "cpuweight=10\n"
		       "Frequency=1GHz\n"
		       "Target=3ms\n"
		       "DryRun=yes\n"
		       "Bogus=1\n"
		       "Windw=1s\n" } },
	  .errors = { "web.policy:7: unknown key 'CPUQuotta' in [Limits]; did you mean 'CPUQuota'?",
		      "web.policy:8: unknown key 'cpuweight' in [Limits]; did you mean 'CPUWeight'?",
		      "web.policy:9: unknown key 'Frequency' in [Limits]; did you mean 'CPUFrequency'?",
		      "web.policy:10: unknown key 'Target' in [Limits]; it belongs in [Objective]",
		      "web.policy:11: unknown key 'DryRun' in [Limits]; it belongs in [Controller] of the main config (tailwarden.conf)",
		      "web.policy:12: unknown key 'Bogus' in [Limits]; expected CPUQuota=, CPUWeight=, IOWeight=, CPUFrequency=, Slice= or Weights=",
		      "web.policy:13: unknown key 'Windw' in [Limits]; did you mean 'Window' in [Objective]?" } },
	{ "duplicate keys and sections",
	  .files = { { "web.policy",
		       LC_HEAD "Class=best-effort\n" LC_OBJ "[Objective]\nTarget=3ms\n" } },
	  .errors = { "web.policy:4: duplicate key 'Class' in [Service]; first at line 3",
		      "web.policy:7: duplicate section [Objective]; first at line 5",
		      "web.policy:8: duplicate key 'Target' in [Objective]; first at line 6" } },
	{ "missing [Service]",
	  .files = { { "web.policy", LC_OBJ } },
	  .errors = { "web.policy:0: missing section [Service] (Cgroup= or Unit=, and Class= are required)" } },
	{ "missing Cgroup= and Class=",
	  .files = { { "web.policy", "# x\n[Service]\n" LC_OBJ } },
	  .errors = { "web.policy:2: missing required key Cgroup= (or Unit=) in [Service]",
		      "web.policy:2: missing required key Class= in [Service]" } },
	{ "latency-critical without [Objective]",
	  .files = { { "web.policy", LC_HEAD "[Limits]\nCPUWeight=100\n" } },
	  .errors = { "web.policy:0: missing section [Objective] (required for latency-critical services)" } },
	{ "latency-critical without Target=",
	  .files = { { "web.policy", LC_HEAD "[Objective]\nPercentile=99\n" } },
	  .errors = { "web.policy:4: missing required key Target= in [Objective]" } },
	{ "best-effort with [Objective] and CPUFrequency=",
	  .files = { { "batch.policy", BE_HEAD LC_OBJ "[Limits]\nCPUWeight=10..100\nCPUFrequency=1GHz..2GHz\n" } },
	  .errors = { "batch.policy:4: [Objective] is for latency-critical services; this one is best-effort",
		      "batch.policy:8: CPUFrequency= is for latency-critical services only; this one is best-effort" } },
	{ "best-effort with nothing that may be taken",
	  .files = { { "batch.policy", BE_HEAD "[Limits]\n" },
		     { "idle.policy", "[Service]\nCgroup=idle\nClass=best-effort\n" } },
	  .errors = { "batch.policy:4: a best-effort service needs at least one of CPUQuota=, CPUWeight= or IOWeight= in [Limits] (what may be taken from it)",
		      "idle.policy:0: a best-effort service needs at least one of CPUQuota=, CPUWeight= or IOWeight= in [Limits] (what may be taken from it)" } },

	/* ---- values ---- */
	{ "[Service] values",
	  .files = { { "a.policy", "[Service]\nCgroup=../etc\nClass=latency_critical\n" },
		     { "b.policy", "[Service]\nCgroup=/\nClass=best-effort\n[Limits]\nCPUWeight=1\n" },
		     { "c.policy", "[Service]\nCgroup=/sys/fs/cgroup/lc.slice\nClass=best-effort\n[Limits]\nCPUWeight=1\n" },
		     { "d.policy", "[Service]\nCgroup=a/./b\nClass=best-effort\n[Limits]\nCPUWeight=1\n" } },
	  .errors = { "a.policy:2: Cgroup=../etc: '..' is not allowed in a cgroup path",
		      "a.policy:3: Class=latency_critical: expected latency-critical or best-effort",
		      "b.policy:2: Cgroup=/: that is the cgroup root itself; name a cgroup below it, e.g. lc.slice/web.service",
		      "c.policy:2: Cgroup=/sys/fs/cgroup/lc.slice: the path is relative to the cgroup root: drop the leading /sys/fs/cgroup",
		      "d.policy:2: Cgroup=a/./b: '.' is not allowed in a cgroup path" } },
	{ "Unit= values, and Unit= with Cgroup=",
	  .files = { { "a.policy", "[Service]\nUnit=web.socket\nClass=best-effort\n[Limits]\nCPUWeight=1\n" },
		     { "b.policy", "[Service]\nUnit=web service.service\nClass=best-effort\n[Limits]\nCPUWeight=1\n" },
		     { "c.policy", "[Service]\nUnit=getty@.service\nClass=best-effort\n[Limits]\nCPUWeight=1\n" },
		     { "d.policy", "[Service]\nCgroup=x\nUnit=x.service\nClass=best-effort\n[Limits]\nCPUWeight=1\n" } },
	  .errors = { "a.policy:2: Unit=web.socket: 'web.socket' is not a .service, .slice or .scope unit",
		      "b.policy:2: Unit=web service.service: 'web service.service' has characters a unit name cannot have (letters, digits and \":-_.\\@\" only)",
		      "c.policy:2: Unit=getty@.service: 'getty@.service' is a template or a malformed instance name; name an instance such as getty@tty1.service",
		      "d.policy:3: Unit= and Cgroup= (line 2) both name the service's cgroup; keep one" } },
	{ "the same unit in two files",
	  .files = { { "a.policy", "[Service]\nUnit=web.service\nClass=latency-critical\n" LC_OBJ },
		     { "b.policy", "[Service]\nUnit=web.service\nClass=best-effort\n[Limits]\nCPUWeight=1\n" } },
	  .errors = { "b.policy:2: unit web.service is also controlled by service 'a' (a.policy:2)" } },
	{ "[Objective] values",
	  .files = { { "a.policy", LC_AT("a") "[Objective]\nPercentile=0.99\nTarget=2\nMinRequests=0\nWindow=50ms\n" },
		     { "b.policy", LC_AT("b") "[Objective]\nPercentile=100\nTarget=2ns\nMinRequests=-5\nWindow=11min\n" },
		     { "c.policy", LC_AT("c") "[Objective]\nPercentile=high\nTarget=61s\nMinRequests=1e3\nWindow=601s\n" },
		     { "d.policy", LC_AT("d") "[Objective]\nPercentile=p0\nTarget=2 sec\n" } },
	  .errors = { "a.policy:5: Percentile=0.99: below 1; percentiles are in percent: 99 (or p99) is the 99th",
		      "a.policy:6: Target=2: missing unit; expected ns, us, \xc2\xb5s, ms or s",
		      "a.policy:7: MinRequests=0: must be at least 1",
		      "a.policy:8: Window=50ms: below the minimum of 100ms",
		      "b.policy:5: Percentile=100: a percentile must be below 100",
		      "b.policy:6: Target=2ns: below the minimum of 1us",
		      "b.policy:7: MinRequests=-5: expected a whole number",
		      "b.policy:8: Window=11min: unknown unit 'min'; expected ns, us, \xc2\xb5s, ms or s",
		      "c.policy:5: Percentile=high: expected a percentile, e.g. 99, 99.9 or p99",
		      "c.policy:6: Target=61s: above the maximum of 60s",
		      "c.policy:7: MinRequests=1e3: expected a whole number",
		      "c.policy:8: Window=601s: above the maximum of 600s",
		      "d.policy:5: Percentile=p0: a percentile must be at least 1",
		      "d.policy:6: Target=2 sec: unknown unit 'sec'; expected ns, us, \xc2\xb5s, ms or s" } },
	{ "[Limits] ranges: order, the kernel's range, 'max', missing bounds",
	  .files = { { "a.policy", LC_HEAD LC_OBJ "[Limits]\nCPUQuota=0.5%..50%\nCPUWeight=1000..10\nIOWeight=0..100\nCPUFrequency=max..1GHz\n" },
		     { "b.policy", LC_AT("b") LC_OBJ "[Limits]\nCPUQuota=max\nCPUWeight=10..max\nIOWeight=..100\nCPUFrequency=1.2MHz..max\n" },
		     { "c.policy", LC_AT("c") LC_OBJ "[Limits]\nCPUQuota=10..20%\nCPUWeight=10.5..100\nIOWeight=10..10001\nCPUFrequency=1.2..2GHz\n" },
		     { "d.policy", LC_AT("d") LC_OBJ "[Limits]\nCPUQuota=50%..20%\nCPUWeight=10..\nIOWeight=10...100\nCPUFrequency=3GHz..2GHz\n" } },
	  .errors = { "a.policy:7: CPUQuota=0.5%..50%: 0.5% is below the minimum of 1%",
		      "a.policy:8: CPUWeight=1000..10: lower bound 1000 is above upper bound 10",
		      "a.policy:9: IOWeight=0..100: 0 is below the minimum of 1",
		      "a.policy:10: CPUFrequency=max..1GHz: 'max' is allowed only as the upper bound of a range",
		      "b.policy:7: CPUQuota=max: 'max' is allowed only as the upper bound of a range, e.g. LOW..max",
		      "b.policy:8: CPUWeight=10..max: 'max' is not allowed here; give a number",
		      "b.policy:9: IOWeight=..100: missing lower bound before '..'",
		      "b.policy:10: CPUFrequency=1.2MHz..max: 1.2MHz is below the minimum of 10MHz",
		      "c.policy:7: CPUQuota=10..20%: missing '%'; expected a percentage, e.g. 50%",
		      "c.policy:8: CPUWeight=10.5..100: expected a whole number",
		      "c.policy:9: IOWeight=10..10001: 10001 is above the maximum of 10000",
		      "c.policy:10: CPUFrequency=1.2..2GHz: missing unit; expected Hz, kHz, MHz or GHz",
		      "d.policy:7: CPUQuota=50%..20%: lower bound 50% is above upper bound 20%",
		      "d.policy:8: CPUWeight=10..: missing upper bound after '..'",
		      "d.policy:9: IOWeight=10...100: expected a whole number",
		      "d.policy:10: CPUFrequency=3GHz..2GHz: lower bound 3GHz is above upper bound 2GHz" } },
	{ "errors in several places of one file are all reported",
	  .files = { { "web.policy", "[Service]\nClass=fast\n[Objective]\nTarget=fast\n[Limits]\nCPUQuota=lots\n" } },
	  .errors = { "web.policy:1: missing required key Cgroup= (or Unit=) in [Service]",
		      "web.policy:2: Class=fast: expected latency-critical or best-effort",
		      "web.policy:4: Target=fast: expected a number and a unit, e.g. 2ms",
		      "web.policy:6: CPUQuota=lots: expected a percentage, e.g. 50%" } },

	/* ---- across files ---- */
	{ "the same service name in two directories",
	  .files = { { "a/web.policy", LC_HEAD LC_OBJ }, { "b/web.policy", "\n[Service]\nCgroup=other\nClass=latency-critical\n" LC_OBJ } },
	  .paths = { "a", "b" },
	  .errors = { "b/web.policy:2: duplicate service 'web': also defined in a/web.policy" } },
	{ "the same cgroup in two files, spelled differently",
	  .files = { { "a.policy", LC_HEAD LC_OBJ }, { "b.policy", "[Service]\nClass=best-effort\nCgroup=/lc.slice//web.service/\n[Limits]\nCPUWeight=1\n" } },
	  .errors = { "b.policy:3: cgroup /lc.slice/web.service is also controlled by service 'a' (a.policy:2)" } },
	{ "nested cgroups, both ways round",
	  .files = { { "a.policy", LC_HEAD LC_OBJ },
		     { "b.policy", "[Service]\nCgroup=lc.slice\nClass=best-effort\n[Limits]\nCPUWeight=1\n" },
		     { "c.policy", "[Service]\nCgroup=lc.slice/web.service/worker\nClass=best-effort\n[Limits]\nCPUWeight=1\n" } },
	  .errors = { "b.policy:2: cgroup /lc.slice contains /lc.slice/web.service of service 'a' (a.policy:2); nested cgroups cannot both have a policy",
		      "c.policy:2: cgroup /lc.slice/web.service/worker is inside /lc.slice/web.service of service 'a' (a.policy:2); nested cgroups cannot both have a policy" } },
	{ "CPUFrequency= in two policies: their CPUs may overlap",
	  .files = { { "a.policy", LC_AT("lc.slice/a") LC_OBJ "[Limits]\nCPUFrequency=1GHz..max\n" },
		     { "b.policy", LC_AT("lc.slice/b") LC_OBJ "[Limits]\nCPUWeight=100\nCPUFrequency=2GHz\n" },
		     { "c.policy", LC_AT("lc.slice/c") LC_OBJ "[Limits]\nCPUWeight=100\n" } },
	  .errors = { "b.policy:8: CPUFrequency= is also set by service 'a' (a.policy:7); at most one policy may set the CPUs' frequency" } },
	{ "an empty directory is an empty set",
	  .files = { { "d/README", "no policies here\n" } },
	  .paths = { "d" },
	  .errors = { "d:0: no policy files (*.policy) in this directory" } },
	{ "a path that does not exist",
	  .files = { { "a.policy", LC_HEAD LC_OBJ } },
	  .paths = { "a.policy", "missing.policy" },
	  .errors = { "missing.policy:0: cannot read: No such file or directory" } },
	{ "a directory named like a policy inside a policy directory",
	  .files = { { "d/a.policy", LC_HEAD LC_OBJ }, { "d/sub.policy/x", "" } },
	  .paths = { "d" },
	  .errors = { "d/sub.policy:0: not a regular file" } },

	/* ---- the main config ---- */
	{ "config: every key",
	  .config = true,
	  .files = { { "tw.conf",
		       "# tailwarden\n[Controller]\nPeriod=500ms\nDryRun=yes\nPoliciesDir=/srv/tw/policies/\n"
		       "StateDir=/var/lib/tw\nDecisionLog=/var/log/tw.jsonl\nCgroupBase=/sys/fs/cgroup/unified\n"
		       "Metrics=[::1]:9100\nDecisionLogMaxSize=1.5M\n" } },
	  .summary = { "tw.conf: period 500ms, dry-run yes, policies /srv/tw/policies, state /var/lib/tw, "
		       "decision log /var/log/tw.jsonl (max 1536K), cgroup base /sys/fs/cgroup/unified, metrics [::1]:9100" } },
	{ "config: defaults for what is left out; the decision log follows StateDir=",
	  .config = true,
	  .files = { { "tw.conf", "[Controller]\nStateDir=/tmp/tw\n" } },
	  .summary = { "tw.conf: period 1s, dry-run no, policies /etc/tailwarden/policies.d, state /tmp/tw, "
		       "decision log /tmp/tw/decisions.jsonl (max 16M), cgroup base /sys/fs/cgroup, metrics 127.0.0.1:9477" } },
	{ "config: bad values",
	  .config = true,
	  .files = { { "tw.conf",
		       "[Controller]\nPeriod=50ms\nDryRun=maybe\nPoliciesDir=policies.d\nStateDir=/run/\x01x\n"
		       "DecisionLog=/var/log/\nCgroupBase=\nPerod=1s\nPeriod=2s\n[Service]\n[Control]\nx=1\n" } },
	  .errors = { "tw.conf:2: Period=50ms: below the minimum of 100ms",
		      "tw.conf:3: DryRun=maybe: expected yes or no",
		      "tw.conf:4: PoliciesDir=policies.d: expected an absolute path (starting with /)",
		      "tw.conf:5: StateDir=/run/?x: control characters are not allowed in a path",
		      "tw.conf:6: DecisionLog=/var/log/: names a directory; expected a file",
		      "tw.conf:7: CgroupBase=: missing value; expected an absolute path",
		      "tw.conf:8: unknown key 'Perod' in [Controller]; did you mean 'Period'?",
		      "tw.conf:9: duplicate key 'Period' in [Controller]; first at line 2",
		      "tw.conf:10: section [Service] belongs in a policy file (*.policy), not in the main config (tailwarden.conf)",
		      "tw.conf:11: unknown section [Control]; did you mean [Controller]?" } },
	{ "config: paths that escape or name the system's files",
	  .config = true,
	  .files = { { "tw.conf",
		       "[Controller]\nPoliciesDir=/etc/tailwarden/../../root\nStateDir=/\nDecisionLog=/etc/passwd\n"
		       "CgroupBase=/etc\n" } },
	  .errors = { "tw.conf:2: PoliciesDir=/etc/tailwarden/../../root: '.' and '..' components are not allowed in a path",
		      "tw.conf:3: StateDir=/: a system directory; use a directory of tailwarden's own, such as /run/tailwarden",
		      "tw.conf:4: DecisionLog=/etc/passwd: is under /etc, a system directory; use a file of tailwarden's own, such as /run/tailwarden/decisions.jsonl",
		      "tw.conf:5: CgroupBase=/etc: is not under /sys/fs/cgroup, where cgroup file systems are mounted" } },
	{ "config: more system directories, and a decision log that is a directory",
	  .config = true,
	  .files = { { "tw.conf",
		       "[Controller]\nStateDir=/lib64/\nDecisionLog=/tmp\nCgroupBase=/sys/fs/cgroupx\nPoliciesDir=/srv/./p\n" } },
	  .errors = { "tw.conf:2: StateDir=/lib64/: a system directory; use a directory of tailwarden's own, such as /run/tailwarden",
		      "tw.conf:3: DecisionLog=/tmp: exists and is a directory; expected a regular file (or none yet)",
		      "tw.conf:4: CgroupBase=/sys/fs/cgroupx: is not under /sys/fs/cgroup, where cgroup file systems are mounted",
		      "tw.conf:5: PoliciesDir=/srv/./p: '.' and '..' components are not allowed in a path" } },
	{ "config: /var itself, a device",
	  .config = true,
	  .files = { { "tw.conf", "[Controller]\nStateDir=/var\nDecisionLog=/dev/null\n" } },
	  .errors = { "tw.conf:2: StateDir=/var: a system directory; use a directory of tailwarden's own, such as /run/tailwarden",
		      "tw.conf:3: DecisionLog=/dev/null: is under /dev, a system directory; use a file of tailwarden's own, such as /run/tailwarden/decisions.jsonl" } },
	{ "config: paths of its own under system-looking names are fine",
	  .config = true,
	  .files = { { "tw.conf", "[Controller]\nStateDir=/var/lib/tailwarden\nDecisionLog=/var/log/tailwarden/d.jsonl\n"
				  "CgroupBase=/sys/fs/cgroup/\nPoliciesDir=/etc/tailwarden/p..d\n" } },
	  .summary = { "tw.conf: period 1s, dry-run no, policies /etc/tailwarden/p..d, state /var/lib/tailwarden, "
		       "decision log /var/log/tailwarden/d.jsonl (max 16M), cgroup base /sys/fs/cgroup, metrics 127.0.0.1:9477" } },
	{ "config: IOScheduler= and IOSchedulerDevices=",
	  .config = true,
	  .files = { { "tw.conf", "[Controller]\nStateDir=/tmp/tw\nIOScheduler=bfq\nIOSchedulerDevices=vda  nvme0n1\n" } },
	  .summary = { "tw.conf: period 1s, dry-run no, policies /etc/tailwarden/policies.d, state /tmp/tw, "
		       "decision log /tmp/tw/decisions.jsonl (max 16M), cgroup base /sys/fs/cgroup, metrics 127.0.0.1:9477, "
		       "I/O scheduler bfq on vda nvme0n1" } },
	{ "config: IOScheduler= alone: on every disk; empty: never",
	  .config = true,
	  .files = { { "tw.conf", "[Controller]\nStateDir=/tmp/tw\nIOScheduler=bfq\n" } },
	  .summary = { "tw.conf: period 1s, dry-run no, policies /etc/tailwarden/policies.d, state /tmp/tw, "
		       "decision log /tmp/tw/decisions.jsonl (max 16M), cgroup base /sys/fs/cgroup, metrics 127.0.0.1:9477, "
		       "I/O scheduler bfq on the disks" } },
	{ "config: AvoidServiceCPUs=yes is said",
	  .config = true,
	  .files = { { "tw.conf", "[Controller]\nStateDir=/tmp/tw\nAvoidServiceCPUs=yes\n" } },
	  .summary = { "tw.conf: period 1s, dry-run no, policies /etc/tailwarden/policies.d, state /tmp/tw, "
		       "decision log /tmp/tw/decisions.jsonl (max 16M), cgroup base /sys/fs/cgroup, metrics 127.0.0.1:9477, "
		       "off the latency-critical services' CPUs" } },
	{ "config: AvoidServiceCPUs= that is not yes or no",
	  .config = true,
	  .files = { { "tw.conf", "[Controller]\nAvoidServiceCPUs=0-1\n" } },
	  .errors = { "tw.conf:2: AvoidServiceCPUs=0-1: expected yes or no" } },
	{ "config: a scheduler other than bfq, a device name that is a path",
	  .config = true,
	  .files = { { "tw.conf", "[Controller]\nIOScheduler=cfq\nIOSchedulerDevices=vda ../../etc\n" } },
	  .errors = { "tw.conf:2: IOScheduler=cfq: 'cfq' is not supported; only bfq (the scheduler I/O weight acts through); leave the key out to never switch",
		      "tw.conf:3: IOSchedulerDevices=vda ../../etc: '../../etc' is not a block device's name as in /sys/block (such as vda or nvme0n1)" } },
	{ "config: too long a period, and a policy key",
	  .config = true,
	  .files = { { "tw.conf", "[Controller]\nPeriod=2min\nTarget=2ms\n" } },
	  .errors = { "tw.conf:2: Period=2min: unknown unit 'min'; expected ns, us, \xc2\xb5s, ms or s",
		      "tw.conf:3: unknown key 'Target' in [Controller]; it belongs in [Objective] of a policy file (*.policy)" } },
	{ "config: a missing file",
	  .config = true,
	  .paths = { "nope.conf" },
	  .errors = { "nope.conf:0: cannot read: No such file or directory" } },
};
// clang-format on

static char *base_dir;
static char repo_dir[512]; /* where the test started: the repository, under make */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

static int group_setup(void **state)
{
	char tmpl[] = "/tmp/tw-test-policy-XXXXXX";

	(void)state;
	if (!mkdtemp(tmpl) || chdir(tmpl) < 0)
		return -1;
	base_dir = strdup(tmpl);
	return base_dir ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	if (chdir("/") < 0)
		return -1;
	nftw(base_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(base_dir);
	return 0;
}

/* Each case in its own directory, so that messages carry short relative paths. */
static int case_setup(void **state)
{
	(void)state;
	if (mkdir("case", 0700) < 0 || chdir("case") < 0)
		return -1;
	return 0;
}

static int case_teardown(void **state)
{
	(void)state;
	if (chdir(base_dir) < 0)
		return -1;
	return nftw("case", rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void write_file(const struct tfile *f)
{
	char dir[256];
	size_t len = f->len ? f->len : strlen(f->text);
	FILE *fp;

	/* mkdir -p of the directories in the name */
	for (const char *s = strchr(f->name, '/'); s; s = strchr(s + 1, '/')) {
		snprintf(dir, sizeof(dir), "%.*s", (int)(s - f->name), f->name);
		if (mkdir(dir, 0700) < 0)
			assert_int_equal(errno, EEXIST);
	}
	fp = fopen(f->name, "w");
	assert_non_null(fp);
	assert_int_equal(fwrite(f->text, 1, len, fp), len);
	assert_int_equal(fclose(fp), 0);
}

/* Asserts errs holds exactly want (NULL-terminated), showing both on a mismatch. */
static void assert_errors(const struct policy_errors *errs, const char *const *want)
{
	size_t n = 0;
	bool same;
	char *got;

	while (n < 16 && want[n])
		n++;
	same = errs->n == n;
	for (size_t i = 0; same && i < n; i++) {
		if (asprintf(&got, "%s:%u: %s", errs->v[i].file, errs->v[i].line, errs->v[i].msg) <
		    0)
			fail();
		same = !strcmp(got, want[i]);
		free(got);
	}
	if (same)
		return;
	print_message("expected:\n");
	for (size_t i = 0; i < n; i++)
		print_message("  %s\n", want[i]);
	print_message("got:\n");
	for (size_t i = 0; i < errs->n; i++)
		print_message("  %s:%u: %s\n", errs->v[i].file, errs->v[i].line, errs->v[i].msg);
	fail();
}

static void test_file_case(void **state)
{
	const struct file_case *c = *state;
	struct policy_errors errs = { 0 };
	struct policy_set *set = (void *)&errs; /* must stay untouched on errors */
	struct tw_config *cfg = (void *)&errs;
	char *paths[4], line[1024];
	size_t n = 0, nf = 0;
	int r;

	for (; nf < ARRAY_SIZE(c->files) && c->files[nf].name; nf++)
		write_file(&c->files[nf]);
	for (; n < ARRAY_SIZE(c->paths) && c->paths[n]; n++)
		paths[n] = (char *)c->paths[n];
	if (!n)
		for (; n < nf; n++)
			paths[n] = (char *)c->files[n].name;

	if (c->config)
		r = config_load(paths[0], &cfg, &errs);
	else
		r = policy_set_load(paths, n, &set, &errs);
	assert_errors(&errs, c->errors);
	if (c->errors[0]) {
		assert_int_equal(r, -EINVAL);
		assert_ptr_equal(c->config ? (void *)cfg : (void *)set, &errs);
		policy_errors_clear(&errs);
		return;
	}
	assert_int_equal(r, 0);
	if (c->config) {
		config_describe(cfg, line, sizeof(line));
		assert_string_equal(line, c->summary[0]);
		config_free(cfg);
		return;
	}
	for (size_t i = 0; i < set->n; i++) {
		assert_non_null(c->summary[i]);
		policy_describe(&set->v[i], line, sizeof(line));
		assert_string_equal(line, c->summary[i]);
	}
	assert_null(set->n < ARRAY_SIZE(c->summary) ? c->summary[set->n] : NULL);
	policy_set_free(set);
}

/* ---- cases that do not fit a static table ---- */

static void test_long_line_and_nul(void **state)
{
	static const char *const want[] = {
		"web.policy:4: line too long (over 4096 bytes)",
		"web.policy:5: NUL byte in line",
		"web.policy:6: unknown key 'Bogus' in [Service]; expected Cgroup=, Unit= or Class=",
		NULL,
	};
	struct policy_errors errs = { 0 };
	struct policy_set *set;
	char *text, *paths[] = { "web.policy" };
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	(void)state;
	assert_non_null(f);
	fputs(LC_HEAD "# ", f);
	for (int i = 0; i < 5000; i++)
		fputc('x', f);
	fputc('\n', f);
	fwrite("Cgroup\0=x\n", 1, 10, f);
	fputs("Bogus=1\n" LC_OBJ, f);
	fclose(f);
	write_file(&(struct tfile){ "web.policy", text, len });
	free(text);
	assert_int_equal(policy_set_load(paths, 1, &set, &errs), -EINVAL);
	assert_errors(&errs, want);
	policy_errors_clear(&errs);
}

static void test_too_many_errors(void **state)
{
	struct policy_errors errs = { 0 };
	struct policy_set *set;
	char *text, *paths[] = { "web.policy" };
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	(void)state;
	assert_non_null(f);
	fputs(LC_HEAD LC_OBJ, f);
	for (int i = 0; i < 200; i++)
		fputs("junk\n", f);
	fclose(f);
	write_file(&(struct tfile){ "web.policy", text, len });
	free(text);
	assert_int_equal(policy_set_load(paths, 1, &set, &errs), -EINVAL);
	assert_int_equal(errs.n, 51);
	assert_int_equal(errs.v[0].line, 6);
	assert_int_equal(errs.v[49].line, 55);
	assert_int_equal(errs.v[50].line, 56);
	assert_string_equal(errs.v[50].msg,
			    "too many errors; the rest of this file is not checked");
	policy_errors_clear(&errs);
}

/*
 * A thousand policies on one cgroup: one error per file (not one per
 * pair, 499,500), and at most 100 printed, then how many more.
 */
static void test_error_cap(void **state)
{
	struct policy_errors errs = { 0 };
	struct policy_set *set;
	char name[64], *paths[] = { "d" }, *buf = NULL;
	size_t len = 0, lines = 0;
	FILE *f;

	(void)state;
	for (int i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "d/p%04d.policy", i);
		write_file(&(struct tfile){ name, LC_HEAD LC_OBJ, 0 });
	}
	assert_int_equal(policy_set_load(paths, 1, &set, &errs), -EINVAL);
	assert_int_equal(errs.n, 999);
	assert_string_equal(errs.v[998].file, "d/p0999.policy");
	assert_string_equal(
		errs.v[998].msg,
		"cgroup /lc.slice/web.service is also controlled by service 'p0000' (d/p0000.policy:2)");
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	policy_errors_print(&errs, f);
	fclose(f);
	for (char *c = buf; *c; c++)
		lines += *c == '\n';
	print_message("1000 policies on one cgroup: %zu errors, %zu lines, %zu bytes printed\n",
		      errs.n, lines, len);
	assert_int_equal(lines, 101);
	assert_true(len < 16384);
	assert_non_null(strstr(buf, "d/p0100.policy:2: cgroup"));
	assert_null(strstr(buf, "d/p0101.policy"));
	assert_string_equal(strrchr(buf, '\n') - strlen("899 more errors not shown"),
			    "899 more errors not shown\n");
	free(buf);
	policy_errors_clear(&errs);
}

/* A file name with a terminal's escape bytes is printed with '?' for them. */
static void test_escape_names(void **state)
{
	struct policy_errors errs = { 0 };
	struct policy_set *set;
	char *paths[] = { "x\x1b]0;pwn\x07.policy" };

	(void)state;
	write_file(&(struct tfile){ paths[0], "[Service]\nCgroup=x\nClass=x\n", 0 });
	assert_int_equal(policy_set_load(paths, 1, &set, &errs), -EINVAL);
	assert_int_equal(errs.n, 1);
	assert_string_equal(errs.v[0].file, "x?]0;pwn?.policy");
	policy_errors_clear(&errs);
}

static void test_config_defaults(void **state)
{
	struct policy_errors errs = { 0 };
	struct tw_config *c;

	(void)state;
	assert_int_equal(config_load(NULL, &c, &errs), 0);
	assert_int_equal(errs.n, 0);
	assert_null(c->file);
	assert_int_equal(c->period_ns, 1000000000ULL);
	assert_false(c->dry_run);
	assert_string_equal(c->policies_dir, "/etc/tailwarden/policies.d");
	assert_string_equal(c->state_dir, "/run/tailwarden");
	assert_string_equal(c->decision_log, "/run/tailwarden/decisions.jsonl");
	assert_string_equal(c->cgroup_base, "/sys/fs/cgroup");
	assert_int_equal(c->decision_log_max_size, 16 << 20);
	config_free(c);
	config_free(NULL);
	policy_set_free(NULL);
}

/* The canonical units of policy.h, field by field. */
static void test_policy_fields(void **state)
{
	static const struct tfile f = {
		"web.policy",
		"[Service]\nCgroup=lc.slice/web.service\nClass=latency-critical\n"
		"[Objective]\nPercentile=p99.9\nTarget=1.5ms\nMinRequests=50\nWindow=500ms\n"
		"[Limits]\nCPUQuota=12.5%..max\nCPUWeight=100\nCPUFrequency=1.2GHz..3GHz\n",
		0
	};
	struct policy_errors errs = { 0 };
	struct policy_set *set;
	char *paths[] = { "web.policy" };
	const struct policy *p;

	(void)state;
	write_file(&f);
	assert_int_equal(policy_set_load(paths, 1, &set, &errs), 0);
	assert_int_equal(set->n, 1);
	p = &set->v[0];
	assert_string_equal(p->name, "web");
	assert_string_equal(p->file, "web.policy");
	assert_int_equal(p->line, 1);
	assert_string_equal(p->cgroup, "/lc.slice/web.service");
	assert_int_equal(p->klass, POLICY_LATENCY_CRITICAL);
	assert_true(fabs(p->percentile - 0.999) < 1e-12);
	assert_int_equal(p->target_ns, 1500000);
	assert_int_equal(p->min_requests, 50);
	assert_int_equal(p->window_ns, 500000000);
	assert_true(p->cpu_quota.set && p->cpu_quota.lo == 0.125 && isinf(p->cpu_quota.hi));
	assert_true(p->cpu_weight.set && p->cpu_weight.lo == 100 && p->cpu_weight.hi == 100);
	assert_false(p->io_weight.set);
	assert_true(p->cpu_freq_khz.set && p->cpu_freq_khz.lo == 1200000 &&
		    p->cpu_freq_khz.hi == 3000000);
	policy_set_free(set);
}

/* Errors pile up across calls, and print as FILE:LINE: message. */
static void test_errors_print(void **state)
{
	static const struct tfile conf = { "tw.conf", "[Controller]\nDryRun=perhaps\n", 0 };
	static const struct tfile pol = { "web.policy", "[Service]\nCgroup=x\nClass=x\n", 0 };
	struct policy_errors errs = { 0 };
	struct policy_set *set;
	struct tw_config *cfg;
	char *paths[] = { "web.policy" }, *buf = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	write_file(&conf);
	write_file(&pol);
	assert_int_equal(config_load("tw.conf", &cfg, &errs), -EINVAL);
	assert_int_equal(policy_set_load(paths, 1, &set, &errs), -EINVAL);
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	policy_errors_print(&errs, f);
	fclose(f);
	assert_string_equal(buf,
			    "tw.conf:2: DryRun=perhaps: expected yes or no\n"
			    "web.policy:3: Class=x: expected latency-critical or best-effort\n");
	free(buf);
	policy_errors_clear(&errs);
	assert_int_equal(errs.n, 0);
	assert_null(errs.v);
}

/* The annotated examples under policies/ are valid, and the config's shows the defaults. */
static void test_examples(void **state)
{
	struct policy_errors errs = { 0 };
	struct tw_config *ex, *def;
	struct policy_set *set;
	char pol[600], conf[600], line[1024], *paths[] = { pol };

	(void)state;
	snprintf(pol, sizeof(pol), "%s/policies/example.policy", repo_dir);
	snprintf(conf, sizeof(conf), "%s/policies/tailwarden.conf.example", repo_dir);
	if (access(pol, R_OK) || access(conf, R_OK))
		skip();
	assert_int_equal(policy_set_load(paths, 1, &set, &errs), 0);
	policy_describe(&set->v[0], line, sizeof(line));
	assert_string_equal(
		line,
		"example: latency-critical /lc.slice/web.service p99 <= 2ms (window 2s, min 200 requests); "
		"limits: CPUQuota 50%..max, CPUWeight 100..1000, IOWeight 100..1000, CPUFrequency 1.2GHz..max, "
		"Slice 300us");
	policy_set_free(set);
	assert_int_equal(config_load(conf, &ex, &errs), 0);
	assert_int_equal(config_load(NULL, &def, &errs), 0);
	assert_int_equal(ex->period_ns, def->period_ns);
	assert_int_equal(ex->dry_run, def->dry_run);
	assert_string_equal(ex->policies_dir, def->policies_dir);
	assert_string_equal(ex->state_dir, def->state_dir);
	assert_string_equal(ex->decision_log, def->decision_log);
	assert_string_equal(ex->cgroup_base, def->cgroup_base);
	config_free(ex);
	config_free(def);
}

/* ---- tailwarden check ---- */

static char *slurp(const char *path)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = fopen(path, "r"), *m = open_memstream(&buf, &len);
	int c;

	assert_non_null(f);
	assert_non_null(m);
	while ((c = fgetc(f)) != EOF)
		fputc(c, m);
	fclose(f);
	fclose(m);
	return buf;
}

/* Runs `tailwarden check ARGS...` in process; its stdout and stderr as strings. */
static int run_check(char **out, char **err, ...)
{
	char *argv[8] = { "check" };
	int argc = 1, r, so, se, fo, fe;
	va_list ap;

	va_start(ap, err);
	while (argc < 7 && (argv[argc] = va_arg(ap, char *)))
		argc++;
	va_end(ap);
	argv[argc] = NULL;
	fflush(stdout);
	fflush(stderr);
	so = dup(1), se = dup(2);
	fo = open("check.out", O_WRONLY | O_CREAT | O_TRUNC, 0600);
	fe = open("check.err", O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(so >= 0 && se >= 0 && fo >= 0 && fe >= 0);
	dup2(fo, 1), dup2(fe, 2);
	optind = 0; /* glibc: a fresh getopt for each in-process run */
	r = cmd_check(argc, argv);
	fflush(stdout);
	fflush(stderr);
	dup2(so, 1), dup2(se, 2);
	close(so), close(se), close(fo), close(fe);
	*out = slurp("check.out");
	*err = slurp("check.err");
	return r;
}

static void test_check_command(void **state)
{
	static const struct tfile web = { "d/web.policy",
					  LC_HEAD LC_OBJ "[Limits]\nCPUWeight=100..1000\n", 0 };
	static const struct tfile batch = { "d/batch.policy",
					    BE_HEAD "[Limits]\nCPUQuota=10%..200%\n", 0 };
	static const struct tfile bad = { "bad/web.policy", LC_HEAD "[Limits]\nCPUQuotta=5%\n", 0 };
	char *out, *err, *want, conf[512], cwd[256];
	FILE *f;

	(void)state;
	write_file(&web);
	write_file(&batch);
	write_file(&bad);

	assert_int_equal(run_check(&out, &err, "d", NULL), 0);
	assert_string_equal(
		out,
		"batch: best-effort /be.slice/batch.service; limits: CPUQuota 10%..200%\n"
		"web: latency-critical /lc.slice/web.service p99 <= 2ms (window 2s, min 200 requests); limits: CPUWeight 100..1000\n");
	assert_string_equal(err, "");
	free(out), free(err);

	assert_int_equal(run_check(&out, &err, "d/web.policy", "bad", NULL), 1);
	assert_string_equal(out, "");
	assert_string_equal(
		err,
		"bad/web.policy:0: missing section [Objective] (required for latency-critical services)\n"
		"bad/web.policy:5: unknown key 'CPUQuotta' in [Limits]; did you mean 'CPUQuota'?\n"
		"bad/web.policy:1: duplicate service 'web': also defined in d/web.policy\n");
	free(out), free(err);

	/* A config alone brings its PoliciesDir=. */
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	snprintf(conf, sizeof(conf), "[Controller]\nPoliciesDir=%s/d\nDryRun=yes\n", cwd);
	f = fopen("tw.conf", "w");
	assert_non_null(f);
	fputs(conf, f);
	fclose(f);
	assert_int_equal(run_check(&out, &err, "tw.conf", NULL), 0);
	assert_true(
		asprintf(
			&want,
			"tw.conf: period 1s, dry-run yes, policies %s/d, state /run/tailwarden, "
			"decision log /run/tailwarden/decisions.jsonl (max 16M), cgroup base /sys/fs/cgroup, "
			"metrics 127.0.0.1:9477\n"
			"batch: best-effort /be.slice/batch.service; limits: CPUQuota 10%%..200%%\n"
			"web: latency-critical /lc.slice/web.service p99 <= 2ms (window 2s, min 200 requests); "
			"limits: CPUWeight 100..1000\n",
			cwd) > 0);
	assert_string_equal(out, want);
	assert_string_equal(err, "");
	free(want), free(out), free(err);

	assert_int_equal(run_check(&out, &err, "a.conf", "b.conf", NULL), 2);
	assert_string_equal(err, "tailwarden check: one main config at a time (a.conf, b.conf)\n");
	free(out), free(err);
	assert_int_equal(run_check(&out, &err, "--bogus", NULL), 2);
	free(out), free(err);
	assert_int_equal(run_check(&out, &err, "--help", NULL), 0);
	assert_true(!strncmp(out, "Usage: tailwarden check [PATH]...\n", 34));
	assert_string_equal(err, "");
	free(out), free(err);
}

/* ---- units ---- */

static void test_durations(void **state)
{
	static const struct {
		const char *s;
		uint64_t ns;
	} good[] = {
		{ "0ns", 0 },
		{ "1ns", 1 },
		{ "999ns", 999 },
		{ "1.5us", 1500 },
		{ "250\xc2\xb5s", 250000 },
		{ "250\xce\xbcs", 250000 },
		{ "2ms", 2000000 },
		{ "2 ms", 2000000 },
		{ "2\tms", 2000000 },
		{ "0.5ms", 500000 },
		{ "1s", 1000000000 },
		{ "0.000000001s", 1 },
		{ "0.0000000004s", 0 },
		{ "007ms", 7000000 },
		{ "1000000000s", 1000000000000000000ULL },
	};
	static const struct {
		const char *s, *why;
	} bad[] = {
		{ "", "expected a number and a unit, e.g. 2ms" },
		{ "ms", "expected a number and a unit, e.g. 2ms" },
		{ "-2ms", "expected a number and a unit, e.g. 2ms" },
		{ "+2ms", "expected a number and a unit, e.g. 2ms" },
		{ ".5ms", "expected a number and a unit, e.g. 2ms" },
		{ " 2ms", "expected a number and a unit, e.g. 2ms" },
		{ "2", "missing unit; expected ns, us, \xc2\xb5s, ms or s" },
		{ "2 ", "missing unit; expected ns, us, \xc2\xb5s, ms or s" },
		{ "2MS", "unknown unit 'MS'; expected ns, us, \xc2\xb5s, ms or s" },
		{ "1.ms", "unknown unit '.ms'; expected ns, us, \xc2\xb5s, ms or s" },
		{ "2e3ms", "unknown unit 'e3ms'; expected ns, us, \xc2\xb5s, ms or s" },
		{ "0x10ms", "unknown unit 'x10ms'; expected ns, us, \xc2\xb5s, ms or s" },
		{ "2ms ", "unknown unit 'ms '; expected ns, us, \xc2\xb5s, ms or s" },
		{ "1m", "unknown unit 'm'; expected ns, us, \xc2\xb5s, ms or s" },
		{ "inf s", "expected a number and a unit, e.g. 2ms" },
		{ "1000000001s", "duration too large" },
		{ "12345678901234567890123456789012345678901s",
		  "expected a number and a unit, e.g. 2ms" },
	};
	char why[VALUE_WHY_MAX];
	uint64_t ns;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		assert_int_equal(value_parse_duration(good[i].s, &ns, why), 0);
		assert_int_equal(ns, good[i].ns);
	}
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		assert_int_equal(value_parse_duration(bad[i].s, &ns, why), -EINVAL);
		assert_string_equal(why, bad[i].why);
	}
}

static void test_percents(void **state)
{
	static const struct {
		const char *s;
		double v;
	} good[] = { { "10%", 0.10 },
		     { "12.5%", 0.125 },
		     { "10 %", 0.10 },
		     { "0%", 0 },
		     { "100000%", 1000 } };
	static const struct {
		const char *s, *why;
	} bad[] = {
		{ "10", "missing '%'; expected a percentage, e.g. 50%" },
		{ "%", "expected a percentage, e.g. 50%" },
		{ "-1%", "expected a percentage, e.g. 50%" },
		{ "10%%", "expected a percentage, e.g. 50%, not '%%' after the number" },
		{ "10 percent", "expected a percentage, e.g. 50%, not 'percent' after the number" },
	};
	char why[VALUE_WHY_MAX];
	double v;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		assert_int_equal(value_parse_percent(good[i].s, &v, why), 0);
		assert_true(fabs(v - good[i].v) < 1e-12);
	}
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		assert_int_equal(value_parse_percent(bad[i].s, &v, why), -EINVAL);
		assert_string_equal(why, bad[i].why);
	}
}

static void test_frequencies(void **state)
{
	static const struct {
		const char *s;
		double khz;
	} good[] = {
		{ "1.2GHz", 1200000 },	     { "800MHz", 800000 },  { "2000000kHz", 2000000 },
		{ "1200000000Hz", 1200000 }, { "1.2ghz", 1200000 }, { "3 GHz", 3000000 },
		{ "1.0000004GHz", 1000000 }, { "1500Hz", 2 },
	};
	static const struct {
		const char *s, *why;
	} bad[] = {
		{ "1.2", "missing unit; expected Hz, kHz, MHz or GHz" },
		{ "1.2G", "unknown unit 'G'; expected Hz, kHz, MHz or GHz" },
		{ "1.2THz", "unknown unit 'THz'; expected Hz, kHz, MHz or GHz" },
		{ "GHz", "expected a number and a unit, e.g. 1.2GHz" },
		{ "max", "expected a number and a unit, e.g. 1.2GHz" },
	};
	char why[VALUE_WHY_MAX];
	double khz;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		assert_int_equal(value_parse_frequency(good[i].s, &khz, why), 0);
		assert_true(khz == good[i].khz);
	}
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		assert_int_equal(value_parse_frequency(bad[i].s, &khz, why), -EINVAL);
		assert_string_equal(why, bad[i].why);
	}
}

static void test_percentiles(void **state)
{
	static const struct {
		const char *s;
		double v;
	} good[] = { { "99", 0.99 }, { "99.9", 0.999 }, { "p99", 0.99 },
		     { "P50", 0.5 }, { "1", 0.01 },	{ "99.999", 0.99999 } };
	static const struct {
		const char *s, *why;
	} bad[] = {
		{ "0.99", "below 1; percentiles are in percent: 99 (or p99) is the 99th" },
		{ "0", "a percentile must be at least 1" },
		{ "100", "a percentile must be below 100" },
		{ "p", "expected a percentile, e.g. 99, 99.9 or p99" },
		{ "99p", "expected a percentile, e.g. 99, 99.9 or p99" },
		{ "pp99", "expected a percentile, e.g. 99, 99.9 or p99" },
		{ "99%", "expected a percentile, e.g. 99, 99.9 or p99" },
		{ "p 99", "expected a percentile, e.g. 99, 99.9 or p99" },
	};
	char why[VALUE_WHY_MAX];
	double v;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		assert_int_equal(value_parse_percentile(good[i].s, &v, why), 0);
		assert_true(fabs(v - good[i].v) < 1e-12);
	}
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		assert_int_equal(value_parse_percentile(bad[i].s, &v, why), -EINVAL);
		assert_string_equal(why, bad[i].why);
	}
}

static void test_integers_and_booleans(void **state)
{
	static const char *const yes[] = { "yes", "YES", "true", "on", "1" };
	static const char *const no[] = { "no", "False", "off", "0" };
	static const char *const not_uint[] = { "", "-1", "+1", "1.0", " 1", "1 ", "0x10", "1e3" };
	char why[VALUE_WHY_MAX];
	uint64_t u;
	bool b;

	(void)state;
	assert_int_equal(value_parse_uint("0", &u, why), 0);
	assert_int_equal(u, 0);
	assert_int_equal(value_parse_uint("18446744073709551615", &u, why), 0);
	assert_true(u == UINT64_MAX);
	assert_int_equal(value_parse_uint("18446744073709551616", &u, why), -EINVAL);
	assert_string_equal(why, "number too large");
	for (size_t i = 0; i < ARRAY_SIZE(not_uint); i++) {
		assert_int_equal(value_parse_uint(not_uint[i], &u, why), -EINVAL);
		assert_string_equal(why, "expected a whole number");
	}
	for (size_t i = 0; i < ARRAY_SIZE(yes); i++) {
		assert_int_equal(value_parse_bool(yes[i], &b, why), 0);
		assert_true(b);
	}
	for (size_t i = 0; i < ARRAY_SIZE(no); i++) {
		assert_int_equal(value_parse_bool(no[i], &b, why), 0);
		assert_false(b);
	}
	assert_int_equal(value_parse_bool("y", &b, why), -EINVAL);
	assert_string_equal(why, "expected yes or no");
}

static void test_sizes(void **state)
{
	static const struct {
		const char *s;
		uint64_t bytes;
	} good[] = {
		{ "0", 0 },
		{ "4096", 4096 },
		{ "100B", 100 },
		{ "512K", 512 << 10 },
		{ "512k", 512 << 10 },
		{ "16M", 16 << 20 },
		{ "16 M", 16 << 20 },
		{ "1.5G", 3ULL << 29 },
		{ "2T", 2ULL << 40 },
		{ "0.5K", 512 },
	};
	static const struct {
		const char *s, *why;
	} bad[] = {
		{ "", "expected a size, e.g. 16M" },
		{ "M", "expected a size, e.g. 16M" },
		{ "-1M", "expected a size, e.g. 16M" },
		{ "16MB", "unknown unit 'MB'; expected bytes or K, M, G, T (powers of 1024)" },
		{ "16 Mi", "unknown unit 'Mi'; expected bytes or K, M, G, T (powers of 1024)" },
		{ "1e3", "unknown unit 'e3'; expected bytes or K, M, G, T (powers of 1024)" },
		{ "9000000T", "size too large" },
	};
	static const struct {
		uint64_t bytes;
		const char *s;
	} shown[] = { { 0, "0" },	    { 1000, "1000" },
		      { 1024, "1K" },	    { 1536 << 10, "1536K" },
		      { 16 << 20, "16M" },  { 1ULL << 30, "1G" },
		      { 5ULL << 40, "5T" }, { 1ULL << 50, "1024T" } };
	char why[VALUE_WHY_MAX], buf[32];
	uint64_t b;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		assert_int_equal(value_parse_size(good[i].s, &b, why), 0);
		assert_true(b == good[i].bytes);
	}
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		assert_int_equal(value_parse_size(bad[i].s, &b, why), -EINVAL);
		assert_string_equal(why, bad[i].why);
	}
	for (size_t i = 0; i < ARRAY_SIZE(shown); i++) {
		value_format_size(shown[i].bytes, buf, sizeof(buf));
		assert_string_equal(buf, shown[i].s);
	}
}

/* DecisionLogMaxSize=: a size of at least 1K, or 0/infinity for no limit. */
static void test_config_max_size(void **state)
{
	static const struct {
		const char *v;
		uint64_t bytes;
		const char *err;
	} cases[] = {
		{ "1M", 1 << 20, NULL },
		{ "1K", 1024, NULL },
		{ "0", 0, NULL },
		{ "infinity", 0, NULL },
		{ "1000", 0,
		  "tw.conf:2: DecisionLogMaxSize=1000: below the minimum of 1K (0 or infinity: no limit)" },
		{ "lots", 0, "tw.conf:2: DecisionLogMaxSize=lots: expected a size, e.g. 16M" },
	};
	char text[128], buf[512];

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct policy_errors errs = { 0 };
		struct tw_config *c = NULL;
		FILE *f = fopen("tw.conf", "w");

		assert_non_null(f);
		snprintf(text, sizeof(text), "[Controller]\nDecisionLogMaxSize=%s\n", cases[i].v);
		fputs(text, f);
		fclose(f);
		if (!cases[i].err) {
			assert_int_equal(config_load("tw.conf", &c, &errs), 0);
			assert_true(c->decision_log_max_size == cases[i].bytes);
			config_describe(c, buf, sizeof(buf));
			assert_non_null(
				strstr(buf, c->decision_log_max_size ? "(max " : "(max infinity)"));
			config_free(c);
		} else {
			assert_int_equal(config_load("tw.conf", &c, &errs), -EINVAL);
			assert_int_equal(errs.n, 1);
			snprintf(buf, sizeof(buf), "%s:%u: %s", errs.v[0].file, errs.v[0].line,
				 errs.v[0].msg);
			assert_string_equal(buf, cases[i].err);
		}
		policy_errors_clear(&errs);
	}
}

static const struct value_range_spec pct = {
	value_parse_percent_bound, value_format_percent, 0.01, 1000, true,
};
static const struct value_range_spec weight = {
	value_parse_weight_bound, value_format_number, 1, 10000, false,
};

static void test_ranges(void **state)
{
	static const struct {
		const char *s;
		const struct value_range_spec *spec;
		double lo, hi;
	} good[] = {
		{ "10..1000", &weight, 10, 1000 }, { " 10 .. 1000 ", &weight, 10, 1000 },
		{ "100", &weight, 100, 100 },	   { "1..1", &weight, 1, 1 },
		{ "1..10000", &weight, 1, 10000 }, { "1%..max", &pct, 0.01, INFINITY },
		{ "1%", &pct, 0.01, 0.01 },	   { "100000%..max", &pct, 1000, INFINITY },
	};
	static const struct {
		const char *s;
		const struct value_range_spec *spec;
		const char *why;
	} bad[] = {
		{ "", &weight, "expected a whole number" },
		{ "..", &weight, "missing lower bound before '..'" },
		{ "10..", &weight, "missing upper bound after '..'" },
		{ "..10", &weight, "missing lower bound before '..'" },
		{ "10...20", &weight, "expected a whole number" },
		{ "10..20..30", &weight, "expected a whole number" },
		{ "1000..10", &weight, "lower bound 1000 is above upper bound 10" },
		{ "0..10", &weight, "0 is below the minimum of 1" },
		{ "10..10001", &weight, "10001 is above the maximum of 10000" },
		{ "10..max", &weight, "'max' is not allowed here; give a number" },
		{ "max", &pct,
		  "'max' is allowed only as the upper bound of a range, e.g. LOW..max" },
		{ "max..max", &pct, "'max' is allowed only as the upper bound of a range" },
		{ "0.99%..max", &pct, "0.99% is below the minimum of 1%" },
		{ "1%..100001%", &pct, "100001% is above the maximum of 100000%" },
		{ "50%..10%", &pct, "lower bound 50% is above upper bound 10%" },
		{ "10%..MAX", &pct, "expected a percentage, e.g. 50%" },
	};
	char why[VALUE_WHY_MAX], big[300];
	double lo, hi;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		assert_int_equal(value_parse_range(good[i].s, good[i].spec, &lo, &hi, why), 0);
		assert_true(lo == good[i].lo && hi == good[i].hi);
	}
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		assert_int_equal(value_parse_range(bad[i].s, bad[i].spec, &lo, &hi, why), -EINVAL);
		assert_string_equal(why, bad[i].why);
	}
	/* A bound padded past the token buffer is refused, never cut into something valid. */
	snprintf(big, sizeof(big), "1%*s%%", 200, "");
	assert_int_equal(value_parse_range(big, &pct, &lo, &hi, why), -EINVAL);
	assert_string_equal(why, "value too long");
}

static void test_formats(void **state)
{
	char buf[64];

	(void)state;
	value_format_duration(0, buf, sizeof(buf));
	assert_string_equal(buf, "0ns");
	value_format_duration(999, buf, sizeof(buf));
	assert_string_equal(buf, "999ns");
	value_format_duration(250000, buf, sizeof(buf));
	assert_string_equal(buf, "250us");
	value_format_duration(2000000, buf, sizeof(buf));
	assert_string_equal(buf, "2ms");
	value_format_duration(1500000000, buf, sizeof(buf));
	assert_string_equal(buf, "1.5s");
	value_format_duration(60000000000ULL, buf, sizeof(buf));
	assert_string_equal(buf, "60s");
	value_format_duration(90000000000ULL, buf, sizeof(buf));
	assert_string_equal(buf, "90s");
	value_format_percent(0.125, buf, sizeof(buf));
	assert_string_equal(buf, "12.5%");
	value_format_percent(INFINITY, buf, sizeof(buf));
	assert_string_equal(buf, "max");
	value_format_frequency(1200000, buf, sizeof(buf));
	assert_string_equal(buf, "1.2GHz");
	value_format_frequency(800000, buf, sizeof(buf));
	assert_string_equal(buf, "800MHz");
	value_format_frequency(500, buf, sizeof(buf));
	assert_string_equal(buf, "500kHz");
	value_format_number(1000, buf, sizeof(buf));
	assert_string_equal(buf, "1000");
}

int main(void)
{
	static struct CMUnitTest file_tests[ARRAY_SIZE(file_cases)];
	const struct CMUnitTest other_tests[] = {
		cmocka_unit_test_setup_teardown(test_long_line_and_nul, case_setup, case_teardown),
		cmocka_unit_test_setup_teardown(test_too_many_errors, case_setup, case_teardown),
		cmocka_unit_test_setup_teardown(test_policy_fields, case_setup, case_teardown),
		cmocka_unit_test_setup_teardown(test_errors_print, case_setup, case_teardown),
		cmocka_unit_test_setup_teardown(test_check_command, case_setup, case_teardown),
		cmocka_unit_test_setup_teardown(test_config_max_size, case_setup, case_teardown),
		cmocka_unit_test(test_config_defaults),
		cmocka_unit_test_setup_teardown(test_error_cap, case_setup, case_teardown),
		cmocka_unit_test_setup_teardown(test_escape_names, case_setup, case_teardown),
		cmocka_unit_test(test_examples),
	};
	const struct CMUnitTest unit_tests[] = {
		cmocka_unit_test(test_durations),   cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_percents),    cmocka_unit_test(test_frequencies),
		cmocka_unit_test(test_percentiles), cmocka_unit_test(test_integers_and_booleans),
		cmocka_unit_test(test_ranges),	    cmocka_unit_test(test_formats),
	};
	int failed = 0;

	if (!getcwd(repo_dir, sizeof(repo_dir)))
		repo_dir[0] = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(file_cases); i++)
		file_tests[i] = (struct CMUnitTest){
			.name = file_cases[i].title,
			.test_func = test_file_case,
			.setup_func = case_setup,
			.teardown_func = case_teardown,
			.initial_state = (void *)&file_cases[i],
		};
	failed += cmocka_run_group_tests_name("policy and config files", file_tests, group_setup,
					      group_teardown);
	failed += cmocka_run_group_tests_name("policy and config, other", other_tests, group_setup,
					      group_teardown);
	failed += cmocka_run_group_tests_name("units", unit_tests, NULL, NULL);
	return failed ? 1 : 0;
}
