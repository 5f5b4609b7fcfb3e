#!/usr/bin/python3
"""Integration tests of tailwarden's actuators, state file and `tailwarden restore`.

Real cgroup v1 knobs on this host (cpu.cfs_quota_us/cpu.cfs_period_us,
cpu.shares, blkio.bfq.weight) in cgroups of the tests' own
(/sys/fs/cgroup/{cpu,blkio,unified}/tailwarden-test-<pid>-<tag>/...); the CPU
frequency through the real libcpupower against a fake /sys/devices/system/cpu
(a tmpfs mounted over it in a private mount namespace, so the host never sees
it). The knobs are driven through the library by `.output/tests/knobtool`
(tests/tools/knobtool.c) and restored by `./tailwarden restore`.
Every test asserts that each file it touched is back to its original value.

Usage: test_knobs.py [-v] [TEST...]   (as root; without root every test is
skipped). Prints PASS/FAIL/SKIP per test and ends with
"N passed, N failed, N skipped"; exits 1 when any test failed.
Environment: TAILWARDEN and KNOBTOOL override the binaries' paths.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TAILWARDEN = os.environ.get("TAILWARDEN", os.path.join(REPO, "tailwarden"))
TOOL = os.environ.get("KNOBTOOL", os.path.join(REPO, ".output", "tests", "knobtool"))
CG = "/sys/fs/cgroup"
HIERARCHIES = ("cpu", "blkio", "unified")   # never "memory"
CPU_SYSFS = "/sys/devices/system/cpu"
NO_DRIVER = ("frequency control unavailable: no cpufreq driver "
             "(/sys/devices/system/cpu/cpu0/cpufreq missing)")
VERBOSE = False


class Failure(Exception):
    pass


class Skip(Exception):
    pass


class SetupError(Exception):
    pass


def info(msg):
    if VERBOSE:
        print("  " + msg, file=sys.stderr, flush=True)


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def readf(path):
    with open(path) as f:
        return f.read().strip()


def writef(path, content):
    with open(path, "w") as f:
        f.write(content)


# ---------------------------------------------------------------------------
# what a test creates, and always removes

_envs = []


class Env:
    """Cgroups (removed depth-first), processes (ended by PID), temp dirs."""

    def __init__(self, tag):
        self.prefix = "/tailwarden-test-%d-%s" % (os.getpid(), tag)
        self.cgroups = []
        self.procs = []
        self.tmpdirs = []
        _envs.append(self)

    def mkcg(self, rel, hierarchies=HIERARCHIES):
        for h in hierarchies:
            p = os.path.join(CG, h, rel.lstrip("/"))
            self.cgroups.append(p)      # before mkdir: cleanup tolerates missing dirs
            os.mkdir(p)
        return rel

    def tmpdir(self):
        d = tempfile.mkdtemp(prefix="tailwarden-test-knobs-")
        self.tmpdirs.append(d)
        return d

    def spawn(self, argv):
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.procs.append(p)
        return p

    def cleanup(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.kill()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                print("warning: pid %d did not die" % p.pid, file=sys.stderr)
        self.procs = []
        for path in reversed(self.cgroups):
            for _ in range(100):
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)
            else:
                print("warning: could not remove %s" % path, file=sys.stderr)
        self.cgroups = []
        for d in self.tmpdirs:
            shutil.rmtree(d, ignore_errors=True)
        self.tmpdirs = []
        if self in _envs:
            _envs.remove(self)


def _on_signal(signum, frame):
    for e in list(_envs):
        e.cleanup()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


# ---------------------------------------------------------------------------
# driving the library and the command

def tool(*args):
    p = subprocess.run([TOOL] + [str(a) for a in args], capture_output=True, text=True,
                       timeout=30)
    info("knobtool %s -> %d %s %s" % (" ".join(map(str, args)), p.returncode,
                                              p.stdout.strip(), p.stderr.strip()))
    return p.returncode, p.stdout.strip(), p.stderr.strip()


def tool_ok(*args):
    rc, out, err = tool(*args)
    check(rc == 0, "knobtool %s: exit %d: %s%s" % (" ".join(map(str, args)), rc, out, err))
    return out


def read_value(base, rel, knob):
    out = tool_ok("read", base, rel, knob)
    return float("inf") if out == "max" else float(out)


def restore_cmd(state_dir):
    p = subprocess.run([TAILWARDEN, "restore", "--state-dir", state_dir], capture_output=True,
                       text=True, timeout=60)
    info("tailwarden restore -> %d\n%s%s" % (p.returncode, p.stdout, p.stderr))
    return p


def hold(env, state_dir, base, rel, *settings):
    """A process that records and writes knobs, then waits (SIGTERM: restore)."""
    p = env.spawn([TOOL, "hold", state_dir, base, rel] + list(settings))
    line = p.stdout.readline().strip()
    if line != "ready":
        p.wait(5)
        raise Failure("hold %s: %r, exit %s: %s" % (" ".join(settings), line, p.returncode,
                                                   p.stderr.read().strip()))
    return p


def snapshot(paths):
    return {p: readf(p) for p in paths}


def check_restored(orig, what):
    now = snapshot(orig)
    bad = ["%s is %s, was %s" % (p, now[p], v) for p, v in orig.items() if now[p] != v]
    check(not bad, "%s: not restored: %s" % (what, "; ".join(bad)))


def v1_files(rel):
    cpu = os.path.join(CG, "cpu", rel.lstrip("/"))
    return {
        "quota": os.path.join(cpu, "cpu.cfs_quota_us"),
        "period": os.path.join(cpu, "cpu.cfs_period_us"),
        "shares": os.path.join(cpu, "cpu.shares"),
        "bfq": os.path.join(CG, "blkio", rel.lstrip("/"), "blkio.bfq.weight"),
    }


def need_v1():
    for h in ("cpu", "blkio"):
        if not os.path.isdir(os.path.join(CG, h)):
            raise Skip("no cgroup v1 %s hierarchy at %s/%s" % (h, CG, h))


def state_knobs(state_dir):
    with open(os.path.join(state_dir, "state.json")) as f:
        return json.load(f)["knobs"]


# ---------------------------------------------------------------------------
# tests

def test_v1_knobs(env):
    """Every v1 knob: read, write, verify in the file, read back, back to the original."""
    need_v1()
    env.mkcg(env.prefix)
    rel = env.mkcg(env.prefix + "/x")
    f = v1_files(rel)
    orig = snapshot(f.values())
    check((readf(f["quota"]), readf(f["shares"]), readf(f["bfq"])) == ("-1", "1024", "100"),
          "a new cgroup has unexpected defaults: %s" % orig)
    check(read_value(CG, rel, "cpu.max") == float("inf"), "quota -1 does not read as max")
    check(read_value(CG, rel, "cpu.weight") == 100, "cpu.shares 1024 does not read as weight 100")
    check(read_value(CG, rel, "io.weight") == 100, "bfq 100 does not read as io.weight 100")
    cases = [
        # knob, value written, file, content expected, value read back by a new process
        ("cpu.max", "0.5", "quota", "50000", 0.5),
        ("cpu.max", "0.015", "quota", "1500", 1500 / 100000),
        ("cpu.max", "1.5", "quota", "150000", 1.5),
        ("cpu.max", "max", "quota", "-1", float("inf")),
        ("cpu.weight", "50", "shares", "512", 50),
        ("cpu.weight", "1", "shares", "10", 1),
        ("cpu.weight", "10000", "shares", "102400", 10000),
        ("io.weight", "100", "bfq", "100", 100),
        ("io.weight", "1", "bfq", "1", 1),
        ("io.weight", "10000", "bfq", "1000", 1000),   # bfq tops out at 1000
    ]
    for knob, value, key, content, back in cases:
        out = tool_ok("write", CG, rel, knob, value)
        check(out == os.path.relpath(f[key], CG), "%s: knob_path %r" % (knob, out))
        check(readf(f[key]) == content, "%s=%s: %s is %s, expected %s"
              % (knob, value, f[key], readf(f[key]), content))
        got = read_value(CG, rel, knob)
        check(got == back, "%s=%s: reads back as %r, expected %r" % (knob, value, got, back))
        check(readf(f["period"]) == orig[f["period"]], "%s changed the period" % knob)
    # The canonical originals written back give the original files.
    for knob, value in (("cpu.max", "max"), ("cpu.weight", "100"), ("io.weight", "100")):
        tool_ok("write", CG, rel, knob, value)
    check_restored(orig, "originals written back")
    # The same cgroup seen from the cgroup2 mount, which has no cpu/io controller here.
    for knob in ("cpu.max", "cpu.weight", "io.weight"):
        rc, out, _ = tool("read", os.path.join(CG, "unified"), rel, knob)
        check(rc == 3 and out.startswith("unavailable: "),
              "%s via %s/unified: exit %d %r, expected unavailable" % (knob, CG, rc, out))
    return "%d writes verified, originals back" % len(cases)


def test_v1_refused(env):
    """What the kernel or the library refuses leaves the files alone; a removed cgroup is ENOENT."""
    need_v1()
    parent = env.mkcg(env.prefix)
    rel = env.mkcg(env.prefix + "/x")
    f = v1_files(rel)
    pf = v1_files(parent)
    orig = snapshot(list(f.values()) + list(pf.values()))
    tool_ok("write", CG, parent, "cpu.max", "0.5")
    rc, _, err = tool("write", CG, rel, "cpu.max", "1.0")   # above the parent's quota (v1)
    check(rc == 1 and "Invalid argument" in err, "child quota above parent's: exit %d %r" % (rc, err))
    check(readf(f["quota"]) == "-1", "refused write changed %s to %s" % (f["quota"], readf(f["quota"])))
    rc, _, err = tool("write", CG, rel, "cpu.max", "0.005")  # 500 µs < 1 ms
    check(rc == 1 and "out of range" in err, "quota below 1 ms: exit %d %r" % (rc, err))
    rc, _, err = tool("write", CG, rel, "cpu.weight", "10001")
    check(rc == 1 and "out of range" in err, "weight 10001: exit %d %r" % (rc, err))
    check_restored({p: v for p, v in orig.items() if p in f.values()}, "after refused writes")
    tool_ok("write", CG, parent, "cpu.max", "max")
    check_restored(orig, "parent")
    for h in ("cpu", "blkio", "unified"):
        os.rmdir(os.path.join(CG, h, rel.lstrip("/")))
    rc, _, err = tool("read", CG, rel, "cpu.weight")
    check(rc == 1 and "No such file" in err, "removed cgroup: exit %d %r" % (rc, err))
    return "kernel EINVAL, -ERANGE twice, ENOENT"


def test_v1_idle(env):
    """Weight 0 is idle on the real kernel: cpu.idle 1; a weight after it puts cpu.idle
    back to 0 first (the kernel refuses a weight while idle). Held idle, then SIGTERM:
    cpu.idle 0 and then the original weight (leaving idle, the kernel sets the default
    1024, so 512 back proves the order)."""
    need_v1()
    env.mkcg(env.prefix)
    rel = env.mkcg(env.prefix + "/x")
    f = v1_files(rel)
    idle = os.path.join(os.path.dirname(f["shares"]), "cpu.idle")
    if not os.path.exists(idle):
        raise Skip("no cpu.idle in this kernel (Linux 5.15+)")
    tool_ok("write", CG, rel, "cpu.weight", "0")
    check(readf(idle) == "1", "cpu.idle %s after weight 0, expected 1" % readf(idle))
    check(read_value(CG, rel, "cpu.weight") == 0, "weight 0 does not read back as 0")
    tool_ok("write", CG, rel, "cpu.weight", "50")
    check((readf(idle), readf(f["shares"])) == ("0", "512"),
          "after weight 50: cpu.idle %s, cpu.shares %s" % (readf(idle), readf(f["shares"])))
    state = env.tmpdir()
    p = hold(env, state, CG, rel, "cpu.weight=0")
    held = (readf(idle), readf(f["shares"]))
    check(held[0] == "1", "held at 0: cpu.idle %s" % held[0])
    rec = [k for k in state_knobs(state) if k["knob"] == "cpu.weight"][0]
    paths = [x["path"] for x in rec["snapshot"]["files"]]
    check(paths == [idle, f["shares"]], "the record's files %s, expected cpu.idle first" % paths)
    p.send_signal(signal.SIGTERM)
    rc = p.wait(10)
    check(rc == 0, "hold exited %d after SIGTERM: %s" % (rc, p.stderr.read().strip()))
    check((readf(idle), readf(f["shares"])) == ("0", "512"),
          "after SIGTERM: cpu.idle %s, cpu.shares %s, expected 0 and 512"
          % (readf(idle), readf(f["shares"])))
    return "idle and back, cpu.shares %s while idle; restored cpu.idle 0 then 512" % held[1]


def test_sigterm_restore(env):
    """Record, write, SIGTERM: every file back, state file gone."""
    need_v1()
    env.mkcg(env.prefix)
    rel = env.mkcg(env.prefix + "/x")
    f = v1_files(rel)
    orig = snapshot(f.values())
    state = env.tmpdir()
    p = hold(env, state, CG, rel, "cpu.max=0.2", "cpu.weight=5", "io.weight=3")
    changed = (readf(f["quota"]), readf(f["shares"]), readf(f["bfq"]))
    check(changed == ("20000", "51", "3"), "written: %s" % (changed,))
    knobs = state_knobs(state)
    check(sorted(k["knob"] for k in knobs) == ["cpu.max", "cpu.weight", "io.weight"],
          "state file lists %s" % [k["knob"] for k in knobs])
    quota = [k for k in knobs if k["knob"] == "cpu.max"][0]
    check(quota["original"] == "max" and quota["written"] == 0.2 and quota["snapshot"]["files"][-1] ==
          {"path": f["quota"], "value": "-1", "written": "20000"},
          "state file's quota record: %s" % quota)
    p.send_signal(signal.SIGTERM)
    rc = p.wait(10)
    check(rc == 0, "hold exited %d after SIGTERM: %s" % (rc, p.stderr.read().strip()))
    check_restored(orig, "after SIGTERM")
    check(not os.path.exists(os.path.join(state, "state.json")), "state file left after restore")
    return "3 knobs restored"


def test_crash_restore(env):
    """Record, write, kill -9, `tailwarden restore`: every file back; again: nothing to do."""
    need_v1()
    env.mkcg(env.prefix)
    rel = env.mkcg(env.prefix + "/x")
    gone = env.mkcg(env.prefix + "/gone")
    f = v1_files(rel)
    orig = snapshot(f.values())
    state = env.tmpdir()
    p = hold(env, state, CG, rel, "cpu.max=0.3", "cpu.weight=2", "io.weight=1")
    p2 = hold(env, state, CG, gone, "cpu.weight=7")
    for q in (p, p2):
        q.kill()
        q.wait(5)
    check(readf(f["quota"]) == "30000" and readf(f["shares"]) == "20" and readf(f["bfq"]) == "1",
          "not written before the crash: %s" % snapshot(f.values()))
    check(len(state_knobs(state)) == 4, "state file after the crash: %s" % state_knobs(state))
    for h in HIERARCHIES:           # one cgroup vanishes while the daemon is dead
        os.rmdir(os.path.join(CG, h, gone.lstrip("/")))
    r = restore_cmd(state)
    check(r.returncode == 0, "tailwarden restore: exit %d: %s" % (r.returncode, r.stderr))
    for key in ("quota", "shares", "bfq"):
        check(f[key] in r.stdout, "restore did not say it restored %s:\n%s" % (f[key], r.stdout))
    check("cgroup gone" in r.stdout, "restore did not mention the vanished cgroup:\n%s" % r.stdout)
    check("restored 4 knob(s)" in r.stdout, "restore summary:\n%s" % r.stdout)
    check_restored(orig, "after tailwarden restore")
    check(not os.path.exists(os.path.join(state, "state.json")), "state file left after restore")
    r = restore_cmd(state)
    check(r.returncode == 0 and "nothing to restore" in r.stdout,
          "second restore: exit %d %r" % (r.returncode, r.stdout + r.stderr))
    r = restore_cmd(os.path.join(state, "does-not-exist"))
    check(r.returncode == 0 and "nothing to restore" in r.stdout, "restore without a state dir: %s"
          % (r.stdout + r.stderr))
    writef(os.path.join(state, "state.json"), "{ garbage")
    r = restore_cmd(state)
    check(r.returncode == 1 and r.stderr.strip(), "corrupt state file: exit %d %r"
          % (r.returncode, r.stderr))
    check(readf(os.path.join(state, "state.json")) == "{ garbage", "corrupt state file was changed")
    return "4 records restored (1 vanished cgroup), exit 0 when nothing, 1 on a bad file"


def test_cpufreq_absent(env):
    """No cpufreq driver: frequency unavailable with the reason, the rest works."""
    need_v1()
    if os.path.exists(os.path.join(CPU_SYSFS, "cpu0", "cpufreq")):
        raise Skip("this host has a cpufreq driver")
    env.mkcg(env.prefix)
    rel = env.mkcg(env.prefix + "/x")
    rc, out, _ = tool("read", CG, rel, "cpufreq")
    check(rc == 3 and out == "unavailable: " + NO_DRIVER, "cpufreq: exit %d %r" % (rc, out))
    check(read_value(CG, rel, "cpu.weight") == 100, "cpu.weight unreadable without cpufreq")
    return "unavailable, with the reason"


def test_cpufreq_fake(env):
    """libcpupower against a fake /sys/devices/system/cpu in a private mount namespace."""
    if not shutil.which("unshare"):
        raise Skip("unshare is not installed")
    p = subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable,
                        os.path.abspath(__file__), "--inside-namespace"] +
                       (["-v"] if VERBOSE else []), capture_output=True, text=True, timeout=120)
    if p.returncode == 77:
        raise Skip(p.stdout.strip().splitlines()[-1] if p.stdout.strip() else "skipped")
    check(p.returncode == 0, "in the namespace: exit %d: %s" % (p.returncode,
                                                                (p.stdout + p.stderr).strip()[-1500:]))
    check(not os.path.exists(os.path.join(CPU_SYSFS, "cpu0", "cpufreq")) or
          readf(os.path.join(CPU_SYSFS, "cpu0", "cpufreq", "scaling_max_freq")) != "1500000",
          "the fake tree leaked out of the namespace")
    return p.stdout.strip().splitlines()[-1]


# ---------------------------------------------------------------------------
# inside the private mount namespace (test_cpufreq_fake)

FAKE_MIN, FAKE_MAX = 1000000, 3000000   # 7 digits, as every value written below:
# libcpupower writes without O_TRUNC, harmless on sysfs but not on tmpfs files.


def make_fake_cpus(n):
    """A tmpfs over /sys/devices/system/cpu with what libcpupower reads (see strace)."""
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0755", "tailwarden-test-cpu",
                    CPU_SYSFS], check=True)
    for name in ("possible", "present", "online"):
        writef(os.path.join(CPU_SYSFS, name), "0-%d\n" % (n - 1))
    for i in range(n):
        d = os.path.join(CPU_SYSFS, "cpu%d" % i)
        os.makedirs(os.path.join(d, "cpufreq"))
        if i:                       # cpu0 has no online file on x86
            writef(os.path.join(d, "online"), "1\n")
        for name, v in (("cpuinfo_min_freq", FAKE_MIN), ("cpuinfo_max_freq", FAKE_MAX),
                        ("scaling_min_freq", FAKE_MIN), ("scaling_max_freq", FAKE_MAX),
                        ("scaling_cur_freq", 2000000), ("scaling_governor", "schedutil"),
                        ("scaling_available_governors", "performance schedutil"),
                        ("scaling_driver", "tailwarden-fake"), ("affected_cpus", i),
                        ("related_cpus", i)):
            writef(os.path.join(d, "cpufreq", name), "%s\n" % v)


def fake_max(cpu):
    return int(readf(os.path.join(CPU_SYSFS, "cpu%d" % cpu, "cpufreq", "scaling_max_freq")))


def inside_namespace():
    env = Env("cpufreq")
    try:
        make_fake_cpus(2)
        base = env.tmpdir()         # a v2 tree whose /lc is confined to CPU 1
        writef(os.path.join(base, "cgroup.controllers"), "cpuset cpu io\n")
        os.mkdir(os.path.join(base, "lc"))
        writef(os.path.join(base, "lc", "cpuset.cpus.effective"), "1\n")
        orig = {c: fake_max(c) for c in (0, 1)}
        check(orig == {0: FAKE_MAX, 1: FAKE_MAX}, "fake tree: %s" % orig)

        check(read_value(base, "/", "cpufreq") == FAKE_MAX, "read of all CPUs")
        # the cgroup's cpuset: only CPU 1 moves; SIGTERM puts it back
        state = env.tmpdir()
        p = hold(env, state, base, "/lc", "cpufreq=1500000")
        check((fake_max(0), fake_max(1)) == (FAKE_MAX, 1500000),
              "cpuset 1: scaling_max_freq %s" % ((fake_max(0), fake_max(1)),))
        check(state_knobs(state)[0]["snapshot"]["cpus"] ==
              [{"cpu": 1, "max_khz": FAKE_MAX, "written_khz": 1500000}],
              "state file: %s" % state_knobs(state))
        p.send_signal(signal.SIGTERM)
        check(p.wait(10) == 0, "hold after SIGTERM: %s" % p.stderr.read())
        check({c: fake_max(c) for c in (0, 1)} == orig, "not restored after SIGTERM")

        # all CPUs, kill -9, tailwarden restore
        p = hold(env, state, base, "/", "cpufreq=2000000")
        p.kill()
        p.wait(5)
        check((fake_max(0), fake_max(1)) == (2000000, 2000000), "all CPUs not at 2 GHz")
        r = restore_cmd(state)
        check(r.returncode == 0 and "cpu0 scaling_max_freq: 2000000 -> 3000000 kHz" in r.stdout
              and "cpu1 scaling_max_freq: 2000000 -> 3000000 kHz" in r.stdout,
              "tailwarden restore: exit %d %s" % (r.returncode, r.stdout + r.stderr))
        check({c: fake_max(c) for c in (0, 1)} == orig, "not restored by tailwarden restore")

        # clamped to the hardware limits; "max" is the hardware maximum
        tool_ok("write", base, "/", "cpufreq", 500000)
        check((fake_max(0), fake_max(1)) == (FAKE_MIN, FAKE_MIN), "not clamped to cpuinfo_min_freq")
        check(read_value(base, "/", "cpufreq") == FAKE_MIN, "read after clamped write")
        tool_ok("write", base, "/", "cpufreq", "max")
        check({c: fake_max(c) for c in (0, 1)} == orig, "max is not cpuinfo_max_freq")

        # an offline CPU is left alone
        writef(os.path.join(CPU_SYSFS, "cpu1", "online"), "0\n")
        tool_ok("write", base, "/", "cpufreq", 2000000)
        check((fake_max(0), fake_max(1)) == (2000000, FAKE_MAX), "offline CPU 1 was written")
        tool_ok("write", base, "/", "cpufreq", "max")
        writef(os.path.join(CPU_SYSFS, "cpu1", "online"), "1\n")
        check({c: fake_max(c) for c in (0, 1)} == orig, "not back to the originals")
        print("cpuset CPUs only, SIGTERM and kill -9 + restore, clamping, offline CPU skipped")
        return 0
    except Failure as e:
        print("FAIL: %s" % e)
        return 1
    finally:
        env.cleanup()


# ---------------------------------------------------------------------------
# runner

TESTS = [
    ("v1_knobs", test_v1_knobs),
    ("v1_refused", test_v1_refused),
    ("v1_idle", test_v1_idle),
    ("sigterm_restore", test_sigterm_restore),
    ("crash_restore", test_crash_restore),
    ("cpufreq_absent", test_cpufreq_absent),
    ("cpufreq_fake", test_cpufreq_fake),
]


def leftovers(tag):
    found = []
    for h in HIERARCHIES:
        base = os.path.join(CG, h)
        try:
            found += [os.path.join(base, n) for n in os.listdir(base)
                      if n.startswith("tailwarden-test-%d-%s" % (os.getpid(), tag))]
        except FileNotFoundError:
            pass
    return found


def run_one(name, fn):
    tag = name.replace("_", "-")
    env = Env(tag)
    t0 = time.monotonic()
    try:
        detail = fn(env)
        status, line = "PASS", "PASS %s" % name + (" (%s)" % detail if detail else "")
    except Skip as e:
        status, line = "SKIP", "SKIP %s: %s" % (name, e)
    except Failure as e:
        status, line = "FAIL", "FAIL %s: %s" % (name, e)
    except SetupError as e:
        status, line = "FAIL", "FAIL %s: setup: %s" % (name, e)
    except Exception as e:  # noqa: BLE001 -- a broken test is a failed test
        traceback.print_exc()
        status, line = "FAIL", "FAIL %s: %s: %s" % (name, type(e).__name__, e)
    finally:
        env.cleanup()
    left = leftovers(tag)
    if left:
        status, line = "FAIL", line.replace("PASS", "FAIL", 1) + "; left behind: %s" % left
    info("%s took %.1f s" % (name, time.monotonic() - t0))
    return status, line


def main(argv):
    global VERBOSE
    args = [a for a in argv if a not in ("-v", "--verbose")]
    VERBOSE = len(args) != len(argv)
    if args == ["--inside-namespace"]:
        return inside_namespace()
    if any(a in ("-h", "--help") for a in args):
        print(__doc__.strip())
        print("tests: " + " ".join(n for n, _ in TESTS))
        return 0
    known = dict(TESTS)
    unknown = [a for a in args if a not in known]
    if unknown:
        print("unknown test(s): %s; known: %s" % (" ".join(unknown), " ".join(known)),
              file=sys.stderr)
        return 2
    selected = [(n, f) for n, f in TESTS if not args or n in args]
    if os.geteuid() != 0:
        for n, _ in selected:
            print("SKIP %s: needs root (creates cgroups, writes their knobs)" % n)
        print("0 passed, 0 failed, %d skipped" % len(selected))
        return 0
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    missing = [b for b in (TAILWARDEN, TOOL) if not os.access(b, os.X_OK)]
    for name, fn in selected:
        if missing:
            status, line = "FAIL", "FAIL %s: setup: %s missing (make tests)" % (name, ", ".join(missing))
        else:
            status, line = run_one(name, fn)
        counts[status] += 1
        print(line, flush=True)
    print("%d passed, %d failed, %d skipped" % (counts["PASS"], counts["FAIL"], counts["SKIP"]))
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
