"""Helpers for tailwarden's integration tests and benchmarks.

Everything a test starts goes through a Session: the cgroups it creates (under a
unique prefix ``tailwarden-test-<pid>``), the processes it starts (placed in
those cgroups and pinned to a CPU), the temporary directories it writes. The
session's cleanup always runs -- on normal exit, on an exception, from atexit
and from SIGINT/SIGTERM/SIGHUP -- and undoes all of it:

  * processes are ended by PID, and only processes this session started or
    their descendants still inside this session's cgroups (never by name);
  * cgroups are removed depth-first once they are empty;
  * temporary directories are deleted.

Host rules: the identity hierarchy is cgroup2
at /sys/fs/cgroup/unified; the memory hierarchy is never touched; the cgroup2
root's cgroup.subtree_control is never written; nothing is mounted.

On a pure cgroup v2 host (/sys/fs/cgroup is cgroup2fs, PURE_V2: the guest
VMs of tests/vm) /sys/fs/cgroup is the identity hierarchy and the only one;
every hierarchy a session names maps to it. A session's cgroups are made
below the cgroup systemd delegated to the tests (TWTEST_CGROUP_BASE, a path
from the cgroup2 root, or else this process's own cgroup: run the tests under
`systemd-run --scope -p Delegate=yes`), and the cpu and io controllers are
enabled in the subtree_control of the test's own cgroups only (and of that
delegated cgroup, after this process moved itself into a leaf of it); never
in the root's.
"""

import atexit
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TAILWARDEN = os.path.join(REPO, "tailwarden")
OUTPUT = os.path.join(REPO, ".output", "tests")
LOADGEN = os.path.join(OUTPUT, "loadgen")
SERVERS = os.path.join(REPO, "tests", "servers")
TSCLIENT = os.path.join(REPO, "tests", "lib", "tsclient.py")
PYTHON = "/usr/bin/python3"

CGROUP_FS = "/sys/fs/cgroup"


def cgroup_fs_type(path=CGROUP_FS):
    """The file system type mounted at path (the last mount there), from /proc/mounts."""
    fstype = None
    try:
        with open("/proc/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3 and parts[1] == path:
                    fstype = parts[2]
    except OSError:
        pass
    return fstype


# Pure cgroup v2 (cgroup2fs at /sys/fs/cgroup) or hybrid/legacy (a tmpfs of
# v1 hierarchies, with cgroup2 at /sys/fs/cgroup/unified, as on the hosts).
PURE_V2 = cgroup_fs_type() == "cgroup2"
UNIFIED = CGROUP_FS if PURE_V2 else os.path.join(CGROUP_FS, "unified")
# The controllers a pure-v2 session enables for its cgroups (when available).
V2_CONTROLLERS = ("cpu", "io")
# Hierarchies a session may create cgroups in. "memory" is deliberately absent.
# "systemd", "blkio" and "pids" are for a test's own systemd user manager,
# which creates its units' cgroups below its own in each of them (hybrid layout).
ALLOWED_HIERARCHIES = ("unified", "cpu", "cpuacct", "blkio", "pids", "systemd")


def log(msg):
    """Progress and diagnostics go to stderr; stdout carries PASS/FAIL lines."""
    print(msg, file=sys.stderr, flush=True)


class TestFailure(Exception):
    """An assertion about tailwarden's behaviour did not hold."""


class SetupError(Exception):
    """The test could not set up its environment (not tailwarden's fault)."""


def check(cond, msg):
    if not cond:
        raise TestFailure(msg)


# ---------------------------------------------------------------------------
# cgroups


class Cgroup:
    """One cgroup, at the same relative path in every hierarchy of the session.

    ``rel`` is the path relative to the cgroup2 root with a leading '/', exactly
    as ``tailwarden top`` prints it in its ``cgroup`` field.
    """

    def __init__(self, rel, hierarchies):
        self.rel = rel
        self.name = rel.rsplit("/", 1)[-1]
        if PURE_V2:     # one hierarchy: every name maps to it
            self.paths = [os.path.join(CGROUP_FS, rel.lstrip("/"))]
        else:
            self.paths = [os.path.join(CGROUP_FS, h, rel.lstrip("/")) for h in hierarchies]

    @property
    def unified(self):
        return os.path.join(UNIFIED, self.rel.lstrip("/"))

    @property
    def inode(self):
        """cgroup2 id as bpf_get_current_cgroup_id() returns it."""
        return os.stat(self.unified).st_ino

    def pids(self, recursive=False):
        out = set()
        dirs = list(self.paths)
        if recursive:
            dirs = [d for p in self.paths for d, _, _ in os.walk(p)]
        for p in dirs:
            try:
                with open(os.path.join(p, "cgroup.procs")) as f:
                    out.update(int(x) for x in f.read().split())
            except FileNotFoundError:
                pass
        return out

    def __repr__(self):
        return "Cgroup(%s)" % self.rel


def tcp_flows_said(text):
    """The daemon's (or top's) line saying why its tcp_flows signal does not
    run (a kernel that lacks iter/tcp or sk_cgrp_data, or refuses the iterator:
    EPERM on one PVM host), stripped; None when it said nothing of the kind."""
    said = [line.strip() for line in text.splitlines() if "tcp_flows:" in line]
    return said[-1] if said else None


def free_port():
    """A loopback TCP port that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc=None, timeout=10.0, host="127.0.0.1"):
    """Wait until something accepts connections on host:port."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise SetupError("server exited with status %s before listening on %d"
                             % (proc.returncode, port))
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise SetupError("nothing listening on %s:%d after %.0f s" % (host, port, timeout))


# ---------------------------------------------------------------------------
# pure cgroup v2: where sessions make their cgroups

_v2_base = None


def _readf_set(path):
    try:
        with open(path) as f:
            return set(f.read().split())
    except FileNotFoundError:
        return set()


def _enable_controllers(path):
    """Enable V2_CONTROLLERS (those available) in path's subtree_control."""
    want = [c for c in V2_CONTROLLERS if c in _readf_set(os.path.join(path, "cgroup.controllers"))]
    have = _readf_set(os.path.join(path, "cgroup.subtree_control"))
    missing = [c for c in want if c not in have]
    if missing:
        with open(os.path.join(path, "cgroup.subtree_control"), "w") as f:
            f.write(" ".join("+" + c for c in missing))


def v2_base():
    """The cgroup (path from the root, no trailing '/') sessions are made below.

    TWTEST_CGROUP_BASE if set, else this process's own cgroup, which systemd
    must have delegated (Delegate=yes). A delegated cgroup with processes in
    it cannot pass controllers down (no internal processes), so when this
    process is the only one there it moves itself into a leaf
    (twtest-runner-PID) and enables cpu and io in the delegated cgroup.
    Never the root's subtree_control.
    """
    global _v2_base
    if _v2_base is not None:
        return _v2_base
    rel = os.environ.get("TWTEST_CGROUP_BASE")
    if not rel:
        with open("/proc/self/cgroup") as f:
            rel = [l.split(":", 2)[2].strip() for l in f if l.startswith("0::")][0]
    rel = "/" + rel.strip("/")
    if rel == "/":
        raise SetupError("the tests run in the cgroup2 root: run them in a delegated cgroup "
                         "(systemd-run --scope -p Delegate=yes ...)")
    path = os.path.join(CGROUP_FS, rel.lstrip("/"))
    avail = _readf_set(os.path.join(path, "cgroup.controllers"))
    enabled = _readf_set(os.path.join(path, "cgroup.subtree_control"))
    if any(c in avail and c not in enabled for c in V2_CONTROLLERS):
        procs = {int(p) for p in _readf_set(os.path.join(path, "cgroup.procs"))}
        others = procs - {os.getpid()}
        if others:
            raise SetupError("%s holds other processes %s: its controllers cannot be passed to "
                             "the tests' cgroups (run them alone under systemd-run --scope -p "
                             "Delegate=yes)" % (rel, sorted(others)))
        if os.getpid() in procs:
            leaf = os.path.join(path, "twtest-runner-%d" % os.getpid())
            os.makedirs(leaf, exist_ok=True)
            with open(os.path.join(leaf, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        _enable_controllers(path)
    _v2_base = rel
    return rel


# ---------------------------------------------------------------------------
# session: owns cgroups, processes and temp dirs, and always cleans them up

_sessions = []
_handlers_installed = False


def _cleanup_all():
    for s in list(_sessions):
        s.cleanup()


def _on_signal(signum, frame):
    if any(s._cleaning for s in _sessions):
        return      # a cleanup is already running in this thread: let it finish
    _cleanup_all()
    # Default action afterwards, so the exit status says which signal it was.
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install_handlers():
    global _handlers_installed
    if _handlers_installed:
        return
    atexit.register(_cleanup_all)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    _handlers_installed = True


class Session:
    """A context manager owning everything one test creates."""

    def __init__(self, hierarchies=("unified",), tag=None):
        for h in hierarchies:
            if h not in ALLOWED_HIERARCHIES:
                raise ValueError("hierarchy %r is not allowed in tests" % h)
        self.hierarchies = tuple(hierarchies)
        base = "tailwarden-test-%d" % os.getpid()
        self.prefix = "/" + base + ("-" + tag if tag else "")
        if PURE_V2:
            self.prefix = v2_base().rstrip("/") + self.prefix
        self.procs = []         # Popen objects, in start order
        self.cgroups = []       # Cgroup objects, in creation order (parents first)
        self.tmpdirs = []
        self._cleaned = False
        self._cleaning = False
        self._lock = threading.RLock()
        self._hooks = []        # run first at cleanup, newest first
        _install_handlers()
        _sessions.append(self)
        self.root = self._mkcg(self.prefix)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cleanup()
        return False

    # -- cgroups ----------------------------------------------------------
    def _mkcg(self, rel):
        cg = Cgroup(rel, self.hierarchies)
        self.cgroups.append(cg)     # before mkdir: cleanup tolerates missing dirs
        for p in cg.paths:
            os.mkdir(p)
        if PURE_V2:
            # Controllers flow down only through subtree_control: enabled in
            # the session's own cgroups (the prefix, or the parent of a
            # nested one such as "be/batch"), never above them.
            parent = os.path.dirname(cg.paths[0])
            if rel == self.prefix:
                _enable_controllers(cg.paths[0])
            elif parent != os.path.join(CGROUP_FS, self.prefix.lstrip("/")):
                _enable_controllers(parent)
        return cg

    def cgroup(self, name):
        """Create a child cgroup of the session prefix in every hierarchy."""
        return self._mkcg(self.prefix + "/" + name)

    def tmpdir(self, tag="tw"):
        d = tempfile.mkdtemp(prefix="tailwarden-test-%s-" % tag)
        self.tmpdirs.append(d)
        return d

    # -- processes --------------------------------------------------------
    def spawn(self, argv, cgroup=None, cpu=None, **kw):
        """Start argv in `cgroup` (all hierarchies), pinned to `cpu` (int or set).

        The child moves itself into the cgroup before exec, so everything it
        execs or forks is accounted there from the first instruction. It gets a
        session of its own so a terminal's ^C reaches only this runner, which
        then stops it in order.
        """
        procs_files = [os.path.join(p, "cgroup.procs") for p in cgroup.paths] if cgroup else []
        cpus = None if cpu is None else ({cpu} if isinstance(cpu, int) else set(cpu))

        def preexec():
            # Runs between fork and exec: only async-signal-safe-ish calls.
            pid = str(os.getpid()).encode()
            for f in procs_files:
                fd = os.open(f, os.O_WRONLY)
                try:
                    os.write(fd, pid)
                finally:
                    os.close(fd)
            if cpus is not None:
                os.sched_setaffinity(0, cpus)

        kw.setdefault("stdin", subprocess.DEVNULL)
        with self._lock:
            if self._cleaned:
                raise SetupError("session already cleaned up")
            p = subprocess.Popen(argv, preexec_fn=preexec, start_new_session=True, **kw)
            self.procs.append(p)
        return p

    def stop(self, proc, sig=signal.SIGTERM, timeout=5.0):
        """Signal one process we started, wait, escalate to SIGKILL."""
        if proc.poll() is None:
            try:
                proc.send_signal(sig)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        return proc.returncode

    def kill_cgroup(self, cg, timeout=5.0):
        """SIGKILL every process in one of our cgroups and wait until it is empty.

        Every PID in there was started by this session or forked by something
        it started (nothing else is ever moved into these cgroups).
        """
        deadline = time.monotonic() + timeout
        while True:
            pids = cg.pids(recursive=True)
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            for p in self.procs:        # reap our direct children
                if p.pid in pids:
                    try:
                        p.wait(0.5)
                    except subprocess.TimeoutExpired:
                        pass
            if time.monotonic() > deadline:
                log("warning: %s still has processes %s" % (cg.rel, sorted(pids)))
                return False
            time.sleep(0.02)
        return True

    # -- cleanup ----------------------------------------------------------
    def cleanup(self):
        with self._lock:
            if self._cleaned:
                return
            self._cleaned = True
            self._cleaning = True
        try:
            self._cleanup()
        finally:
            self._cleaning = False
            if self in _sessions:
                _sessions.remove(self)

    def on_cleanup(self, fn):
        """Run fn() first at cleanup (also on failure or a signal), newest first."""
        self._hooks.append(fn)

    def _subtree(self, cg):
        """cg's directories in every hierarchy and everything below them, deepest first."""
        out = []
        for top in cg.paths:
            for d, _, _ in os.walk(top, topdown=False):
                out.append(d)
        return out

    def _cleanup(self):
        for fn in reversed(self._hooks):
            try:
                fn()
            except Exception as e:  # noqa: BLE001 -- the rest of the cleanup must run
                log("warning: cleanup hook failed: %s" % e)
        # 1. ask politely, newest first (clients before servers before top)
        for p in reversed(self.procs):
            if p.poll() is None:
                try:
                    p.terminate()
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 3.0
        for p in reversed(self.procs):
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for p in reversed(self.procs):
            if p.poll() is None:
                p.kill()
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    log("warning: pid %d did not die" % p.pid)
        # 2. descendants left in our cgroups (e.g. an nginx worker whose master died)
        for cg in reversed(self.cgroups):
            self.kill_cgroup(cg)
        # 3. remove cgroups depth-first (children were created after parents),
        #    with whatever a test's systemd created below them
        for cg in reversed(self.cgroups):
            for path in self._subtree(cg):
                for _ in range(100):
                    try:
                        os.rmdir(path)
                        break
                    except FileNotFoundError:
                        break
                    except OSError:
                        time.sleep(0.05)    # EBUSY while exiting tasks leave
                else:
                    log("warning: could not remove %s" % path)
        for d in self.tmpdirs:
            shutil.rmtree(d, ignore_errors=True)

    # -- servers ----------------------------------------------------------
    def nginx_unit_argv(self, port, cpu=0):
        """nginx in the foreground with a prefix of its own (NGINX_CONF), as
        the command of a systemd unit that a test starts (test_systemd's
        user manager, the guest VMs' PID 1)."""
        d = self.tmpdir("nginx-unit")
        os.chmod(d, 0o755)
        os.makedirs(os.path.join(d, "html"))
        os.makedirs(os.path.join(d, "logs"))
        with open(os.path.join(d, "html", "index.html"), "w") as f:
            f.write("tailwarden test page\n" * 30)
        conf = os.path.join(d, "nginx.conf")
        with open(conf, "w") as f:
            f.write(NGINX_CONF.format(dir=d, port=port, disk=""))
        return ["/usr/bin/taskset", "-c", str(cpu), "/usr/sbin/nginx", "-p", d + "/",
                "-c", conf, "-e", os.path.join(d, "logs", "error.log")]

    def nginx(self, cgroup, cpu=0, port=None, body_size=612, disk_dir=None, heavy_kib=0):
        """nginx with its own prefix: daemon off, 1 worker, access_log off.

        It serves a static file (sendfile path) at / and keeps connections alive
        far longer than any test, so a loadgen connection is never closed under it.
        With disk_dir, /disk/NAME serves disk_dir/NAME with O_DIRECT reads in
        nginx's thread pool (directio, aio threads, one 64 KiB buffer): every
        such request reads the disk, and the event loop does not wait for it.
        (nginx reads a file of one page or less without O_DIRECT.)
        With heavy_kib, /heavy/page costs nginx far more CPU than its client:
        a gzip of heavy_kib KiB of text served with gzip_static always and
        gunzip on, so nginx inflates it for every request (the client sends
        no Accept-Encoding) and the client reads plain text.
        """
        port = port or free_port()
        d = self.tmpdir("nginx")
        os.makedirs(os.path.join(d, "html"))
        os.makedirs(os.path.join(d, "logs"))
        with open(os.path.join(d, "html", "index.html"), "wb") as f:
            f.write((b"tailwarden test page\n" * (body_size // 21 + 1))[:body_size])
        conf = os.path.join(d, "nginx.conf")
        with open(conf, "w") as f:
            disk = ("location /disk/ {{ alias {0}/; directio 512; aio threads; "
                    "output_buffers 1 64k; }}"
                    .format(disk_dir) if disk_dir else "")
            if heavy_kib:
                import gzip
                import random
                os.makedirs(os.path.join(d, "html", "heavy"))
                rnd = random.Random(heavy_kib)
                words = [("%x" % rnd.getrandbits(24)) for _ in range(512)]
                text = " ".join(rnd.choice(words) for _ in range(heavy_kib * 160))
                with gzip.open(os.path.join(d, "html", "heavy", "page.gz"), "wb", 6) as g:
                    g.write(text.encode()[:heavy_kib * 1024])
                disk += " location /heavy/ { gzip_static always; gunzip on; }"
            f.write(NGINX_CONF.format(dir=d, port=port, disk=disk))
        argv = ["nginx", "-p", d + "/", "-c", conf, "-e", os.path.join(d, "logs", "error.log")]
        srv = Server(self, "nginx", argv, cgroup, cpu, port, d)
        srv.start()
        return srv

    def redis(self, cgroup, cpu=0, port=None):
        port = port or free_port()
        d = self.tmpdir("redis")
        argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no", "--daemonize", "no",
                "--dir", d, "--protected-mode", "no", "--logfile", os.path.join(d, "redis.log")]
        srv = Server(self, "redis", argv, cgroup, cpu, port, d)
        srv.start()
        return srv

    def memcached(self, cgroup, cpu=0, port=None):
        port = port or free_port()
        argv = ["memcached", "-u", "root", "-l", "127.0.0.1", "-p", str(port), "-U", "0"]
        srv = Server(self, "memcached", argv, cgroup, cpu, port, None)
        srv.start()
        return srv

    def pyserver(self, script, cgroup, cpu=0, port=None, args=()):
        """One of tests/servers/*.py."""
        port = port or free_port()
        argv = [PYTHON, os.path.join(SERVERS, script), "--port", str(port)] + list(args)
        srv = Server(self, script, argv, cgroup, cpu, port, None)
        srv.start()
        return srv

    def sleeper(self, cgroup, seconds=600):
        return self.spawn(["sleep", str(seconds)], cgroup=cgroup)

    # -- tailwarden top ---------------------------------------------------
    def top(self, cgroups=(), interval=1.0, count=None, extra=(), cgroup=None):
        t = Top(self, cgroups, interval, count, extra, cgroup)
        t.start()
        return t

    # -- clients ----------------------------------------------------------
    def loadgen(self, proto, port, rate, duration, conns=8, cpu=1, cgroup=None,
                extra=(), background=False):
        """Run loadgen pinned to `cpu`; return its final JSON object."""
        ensure_loadgen()
        argv = [LOADGEN, "--proto", proto, "--port", str(port), "--rate", str(rate),
                "--duration", str(duration), "--conns", str(conns)] + list(extra)
        run = ClientRun(self, argv, cgroup, cpu, parse_loadgen)
        run.start()
        if background:
            return run
        return run.result(timeout=duration + 30)

    def tsclient(self, proto, port, rate, duration, conns=8, cpu=1, cgroup=None, extra=()):
        """Run the kernel-timestamp reference client (tests/lib/tsclient.py)."""
        argv = [PYTHON, TSCLIENT, "--proto", proto, "--port", str(port), "--rate", str(rate),
                "--duration", str(duration), "--conns", str(conns)] + list(extra)
        return ClientRun(self, argv, cgroup, cpu, parse_loadgen).start().result(duration + 30)


NGINX_CONF = """\
daemon off;
master_process on;
worker_processes 1;
user root;
pid {dir}/nginx.pid;
error_log {dir}/logs/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {dir}/client_body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    sendfile on;
    tcp_nodelay on;
    keepalive_requests 1000000;
    keepalive_timeout 300s;
    default_type text/html;
    server {{
        listen 127.0.0.1:{port} reuseport backlog=4096;
        root {dir}/html;
        location / {{ index index.html; }}
        location = /nginx_status {{ stub_status; }}
        {disk}
    }}
}}
"""


class Server:
    """A real server process in a test cgroup, on a loopback port."""

    def __init__(self, sess, name, argv, cgroup, cpu, port, workdir):
        self.sess, self.name, self.argv = sess, name, argv
        self.cgroup, self.cpu, self.port, self.workdir = cgroup, cpu, port, workdir
        self.proc = None

    def start(self, timeout=10.0):
        logf = None
        if self.workdir:
            logf = open(os.path.join(self.workdir, "stdout.log"), "ab")
        self.proc = self.sess.spawn(self.argv, cgroup=self.cgroup, cpu=self.cpu,
                                    stdout=logf or subprocess.DEVNULL,
                                    stderr=subprocess.STDOUT)
        if logf:
            logf.close()
        try:
            wait_port(self.port, self.proc, timeout)
        except SetupError as e:
            raise SetupError("%s: %s%s" % (self.name, e, self._log_tail()))
        return self

    def nginx_requests(self):
        """nginx's own count of requests served so far (stub_status), plus this one."""
        import urllib.request
        with urllib.request.urlopen("http://127.0.0.1:%d/nginx_status" % self.port, timeout=5) as r:
            lines = r.read().decode().splitlines()
        return int(lines[2].split()[2])

    def kill(self):
        """SIGKILL the server and everything it forked (all of its cgroup)."""
        self.sess.kill_cgroup(self.cgroup)
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass

    def stop(self):
        return self.sess.stop(self.proc)

    def _log_tail(self):
        if not self.workdir:
            return ""
        out = []
        for name in ("stdout.log", "logs/error.log", "redis.log"):
            p = os.path.join(self.workdir, name)
            if os.path.exists(p):
                with open(p, errors="replace") as f:
                    out.append(f.read()[-500:])
        return ("\n" + "\n".join(out)) if out else ""


# ---------------------------------------------------------------------------
# tailwarden top --json


class TopError(Exception):
    pass


class Top:
    """`tailwarden top --json` in the background; collects its JSON lines.

    Every line is stored with the monotonic time it arrived, so a test can wait
    for "the interval that closed after my load ended" without relying on how
    `ts` is defined.
    """

    READY = "sensing mode:"

    def __init__(self, sess, cgroups, interval, count, extra, cgroup):
        self.sess = sess
        self.filters = list(cgroups)
        self.interval = interval
        # TW_TOP_EXTRA: more top options for every test (e.g. --no-contention
        # to tell the contention sensor's effects apart when debugging).
        self.argv = [TAILWARDEN, "top", "--json", "--interval", str(interval)] + \
            os.environ.get("TW_TOP_EXTRA", "").split()
        for c in cgroups:
            self.argv += ["--cgroup", c.rel if isinstance(c, Cgroup) else str(c)]
        if count is not None:
            self.argv += ["--count", str(count)]
        self.argv += list(extra)
        self.cgroup = cgroup
        self.objects = []           # (arrival monotonic time, dict)
        self.bad_lines = []
        self.stderr_lines = []
        self.mode = None
        self._cv = threading.Condition()
        self.proc = None

    def start(self, timeout=30.0):
        if not os.access(TAILWARDEN, os.X_OK):
            raise TopError("%s is not built (run make)" % TAILWARDEN)
        self.proc = self.sess.spawn(self.argv, cgroup=self.cgroup, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, bufsize=0)
        self.t_start = time.monotonic()
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        deadline = time.monotonic() + timeout
        with self._cv:
            while self.mode is None:
                if self.proc.poll() is not None and self._eof_err:
                    raise TopError("tailwarden top exited with %s before '%s': %s"
                                   % (self.proc.returncode, self.READY, self.stderr_text()[-800:]))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TopError("no '%s' line on stderr within %.0f s: %s"
                                   % (self.READY, timeout, self.stderr_text()[-800:]))
                self._cv.wait(min(left, 0.2))
        self.t_ready = time.monotonic()
        return self

    _eof_err = False
    _eof_out = False

    def _read_stdout(self):
        for raw in iter(self.proc.stdout.readline, b""):
            now = time.monotonic()
            line = raw.decode("utf-8", "replace").strip()
            if not line:
                continue
            try:
                obj = json.loads(line)
                if not isinstance(obj, dict):
                    raise ValueError("not an object")
            except ValueError:
                with self._cv:
                    self.bad_lines.append(line)
                    self._cv.notify_all()
                continue
            with self._cv:
                self.objects.append((now, obj))
                self._cv.notify_all()
        with self._cv:
            self._eof_out = True
            self._cv.notify_all()

    def _read_stderr(self):
        for raw in iter(self.proc.stderr.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with self._cv:
                self.stderr_lines.append(line)
                if self.mode is None and self.READY in line:
                    self.mode = line.split(self.READY, 1)[1].strip()
                self._cv.notify_all()
        with self._cv:
            self._eof_err = True
            self._cv.notify_all()

    def stderr_text(self):
        with self._cv:
            return "\n".join(self.stderr_lines)

    def rows(self, cgroup=None):
        """JSON objects so far (for one cgroup path if given), in arrival order."""
        rel = cgroup.rel if isinstance(cgroup, Cgroup) else cgroup
        with self._cv:
            return [o for _, o in self.objects if rel is None or o.get("cgroup") == rel]

    def wait_past(self, t, cgroups=None, timeout=None):
        """Wait until, for each cgroup, an object arrived after monotonic time t.

        An interval's object is printed when the interval closes, so the first
        object arriving after the load ended covers the load's last request.
        """
        rels = [c.rel if isinstance(c, Cgroup) else c for c in (cgroups or self.filters)]
        timeout = timeout if timeout is not None else 2 * self.interval + 10
        deadline = time.monotonic() + timeout
        with self._cv:
            while True:
                seen = {o.get("cgroup") for at, o in self.objects if at > t}
                if all(r in seen for r in rels) and (rels or seen):
                    return True
                if self._eof_out:
                    raise TopError("tailwarden top exited (%s) before an interval closed "
                                   "after the load: %s" % (self.proc.poll(), self.stderr_text()[-800:]))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TopError("no interval object for %s within %.0f s after the load"
                                   % (rels, timeout))
                self._cv.wait(min(left, 0.2))

    def wait_exit(self, timeout):
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        with self._cv:      # let the reader threads drain the pipes
            end = time.monotonic() + 2
            while not (self._eof_out and self._eof_err) and time.monotonic() < end:
                self._cv.wait(0.1)
        return self.proc.returncode

    def stop(self, sig=signal.SIGINT, timeout=10.0):
        """Stop top (SIGINT by default) and return its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        rc = self.wait_exit(timeout)
        if rc is None:
            self.proc.kill()
            rc = self.wait_exit(5)
            raise TopError("tailwarden top did not exit within %.0f s of signal %d"
                           % (timeout, sig))
        return rc


# ---------------------------------------------------------------------------
# clients


class ClientRun:
    """A client process (loadgen, wrk, redis-benchmark) with output parsing."""

    def __init__(self, sess, argv, cgroup, cpu, parser):
        self.sess, self.argv, self.cgroup, self.cpu, self.parser = sess, argv, cgroup, cpu, parser
        self.proc = None
        self.t_end = None

    def start(self):
        self.t_start = time.monotonic()
        self.proc = self.sess.spawn(self.argv, cgroup=self.cgroup, cpu=self.cpu,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        return self

    def result(self, timeout=60):
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            raise SetupError("%s did not finish within %.0f s" % (self.argv[0], timeout))
        self.t_end = time.monotonic()
        out = out.decode("utf-8", "replace")
        err = err.decode("utf-8", "replace")
        if self.proc.returncode != 0:
            raise SetupError("%s exited %d: %s %s" % (os.path.basename(self.argv[0]),
                                                     self.proc.returncode, out[-500:], err[-500:]))
        try:
            res = self.parser(out)
        except (ValueError, KeyError, IndexError) as e:
            raise SetupError("cannot parse %s output (%s): %s" % (self.argv[0], e, out[-800:]))
        res["_t_end"] = self.t_end
        res["_stderr"] = err
        return res


def parse_loadgen(out):
    lines = [l for l in out.splitlines() if l.strip().startswith("{")]
    return json.loads(lines[-1])


def parse_wrk(out):
    """wrk: '  12345 requests in 3.00s, 9.12MB read'."""
    import re
    m = re.search(r"^\s*(\d+) requests in ([\d.]+)(m?s)", out, re.M)
    if not m:
        raise ValueError("no 'requests in' line")
    res = {"completed": int(m.group(1))}
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    res["errors"] = sum(int(x) for x in m.groups()) if m else 0
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    res["rps"] = float(m.group(1)) if m else None
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    res["non2xx"] = int(m.group(1)) if m else 0
    return res


def parse_redis_benchmark(out):
    """redis-benchmark: '  20000 requests completed in 0.52 seconds'."""
    import re
    # redis-benchmark redraws its progress line with '\r'; take the final report.
    text = out.replace("\r", "\n")
    m = re.findall(r"(\d+) requests completed in ([\d.]+) seconds", text)
    if not m:
        raise ValueError("no 'requests completed' line")
    n, secs = m[-1]
    return {"completed": int(n), "seconds": float(secs)}


def wrk(sess, port, threads=1, conns=8, duration="3s", cpu=1, cgroup=None, path="/"):
    argv = ["wrk", "-t%d" % threads, "-c%d" % conns, "-d%s" % duration,
            "http://127.0.0.1:%d%s" % (port, path)]
    run = ClientRun(sess, argv, cgroup, cpu, parse_wrk).start()
    return run.result(timeout=60)


def redis_benchmark(sess, port, n=20000, conns=8, cpu=1, cgroup=None):
    argv = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-n", str(n),
            "-c", str(conns), "-t", "get", "-P", "1"]
    run = ClientRun(sess, argv, cgroup, cpu, parse_redis_benchmark).start()
    return run.result(timeout=120)


_loadgen_checked = False


def ensure_loadgen():
    """Build .output/tests/loadgen from tests/loadgen.c if it is missing or stale."""
    global _loadgen_checked
    if _loadgen_checked:
        return
    src = os.path.join(REPO, "tests", "loadgen.c")
    if not os.path.exists(src) and not os.path.exists(LOADGEN):
        raise SetupError("tests/loadgen.c does not exist yet")
    if os.path.exists(src) and (not os.path.exists(LOADGEN)
                                or os.path.getmtime(src) > os.path.getmtime(LOADGEN)):
        os.makedirs(OUTPUT, exist_ok=True)
        r = subprocess.run(["cc", "-O2", "-g", "-std=gnu11", "-Wall", "-Wextra", "-Werror",
                            "-o", LOADGEN, src, "-lm"], capture_output=True, text=True)
        if r.returncode != 0:
            raise SetupError("building loadgen failed: %s" % r.stderr[-800:])
    _loadgen_checked = True


# ---------------------------------------------------------------------------
# merging tailwarden's per-interval percentiles

PCTS = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p999", 0.999), ("max", 1.0))


def _cdf_points(lat):
    pts = [(0.0, 0.0)]
    for k, q in PCTS:
        v = lat.get(k)
        if v is None:
            continue
        v = float(v)
        if v < pts[-1][0]:
            v = pts[-1][0]          # keep the curve monotonic
        pts.append((v, q))
    return pts


def _cdf_at(pts, x):
    if x >= pts[-1][0]:
        return 1.0
    for (x0, q0), (x1, q1) in zip(pts, pts[1:]):
        if x <= x1:
            if x1 == x0:
                return q1
            return q0 + (q1 - q0) * (x - x0) / (x1 - x0)
    return 1.0


def merged_quantile(rows, q, key="latency_us", count_key="requests"):
    """The q-quantile of the union of several intervals' latency distributions.

    Each interval's distribution is rebuilt as a piecewise-linear CDF through
    (0,0), (p50,.5), (p90,.9), (p99,.99), (p999,.999), (max,1) and weighted by
    its request count; the merged quantile is found by bisection. When one
    interval holds every request (how the tests arrange it) this returns that
    interval's own percentile exactly, so nothing is lost by merging; when the
    load straddles an interval boundary the result stays a sensible weighted
    value instead of, say, the max of the intervals' p99s (which would overstate
    the tail) or their mean (which is not a percentile of anything).
    """
    parts = []
    for r in rows:
        lat = r.get(key) if key != "outbound" else (r.get("outbound") or {}).get("latency_us")
        n = r.get(count_key) if key != "outbound" else (r.get("outbound") or {}).get("requests")
        if lat and n:
            parts.append((n, _cdf_points(lat)))
    if not parts:
        return None
    total = sum(n for n, _ in parts)
    lo, hi = 0.0, max(p[-1][0] for _, p in parts)
    for _ in range(100):
        mid = (lo + hi) / 2
        f = sum(n * _cdf_at(p, mid) for n, p in parts) / total
        if f < q:
            lo = mid
        else:
            hi = mid
    return hi


def total(rows, key="requests"):
    return sum(int(r.get(key) or 0) for r in rows)


def within(a, b, rel=0.0, abs_=0.0):
    return abs(a - b) <= max(rel * abs(b), 0) + abs_


def leftovers():
    """Our own cgroups/processes still present after a run (should be none)."""
    found = []
    if PURE_V2:
        bases = [os.path.join(CGROUP_FS, v2_base().lstrip("/"))] if _v2_base else []
    else:
        bases = [os.path.join(CGROUP_FS, h) for h in ALLOWED_HIERARCHIES]
    for base in bases:
        try:
            for n in os.listdir(base):
                if n.startswith("tailwarden-test-%d" % os.getpid()):
                    found.append(os.path.join(base, n))
        except FileNotFoundError:
            pass
    return found


# ---------------------------------------------------------------------------
# the test runner every integration script shares


class Skip(Exception):
    """The test cannot run on this host; the message says why."""


def run_one(name, fn, wrap=None):
    """Run one test; return ('PASS'|'FAIL'|'SKIP', the line to print).

    wrap(fn) runs fn with what it needs (a Session, say) and returns its
    detail; by default fn() is called bare. A test that leaves a cgroup of
    this process behind fails, whatever it returned.
    """
    t0 = time.monotonic()
    try:
        detail = wrap(fn) if wrap else fn()
        status, line = "PASS", "PASS %s" % name + (" (%s)" % detail if detail else "")
    except Skip as e:
        status, line = "SKIP", "SKIP %s: %s" % (name, e)
    except (TestFailure, TopError) as e:
        status, line = "FAIL", "FAIL %s: %s" % (name, e)
    except SetupError as e:
        status, line = "FAIL", "FAIL %s: setup: %s" % (name, e)
    except Exception as e:  # noqa: BLE001 -- a broken test is a failed test
        import traceback
        traceback.print_exc()
        status, line = "FAIL", "FAIL %s: %s: %s" % (name, type(e).__name__, e)
    left = leftovers()
    if left:
        status, line = "FAIL", line.replace(status, "FAIL", 1) + "; left behind: %s" % left
    if os.environ.get("TW_VERBOSE"):
        log("%s took %.1f s" % (name, time.monotonic() - t0))
    return status, line


def main(doc, tests, argv, root_why, run=None, retry=(), prepare=None):
    """Parse [-v] [-h] [TEST...], run the tests, print PASS/FAIL/SKIP lines and
    "N passed, N failed, N skipped"; return the exit status (1 on a failure,
    2 on an unknown test name).

    run(name, fn) runs one test (default run_one(name, fn)). Tests named in
    retry run a second time after a failure: they compare a perturbed phase
    with a baseline taken on a shared 2-CPU VM, whose neighbours can spoil
    a baseline now and then. The first failure is printed as a RETRY line
    and quoted in the final line; a second failure fails. prepare(), when
    given, runs once before the tests and returns None or why every test
    fails (a binary not built, say).
    """
    args = [a for a in argv if a not in ("-v", "--verbose")]
    if len(args) != len(argv):
        os.environ["TW_VERBOSE"] = "1"
    if any(a in ("-h", "--help") for a in args):
        print(doc.strip())
        print("tests: " + " ".join(n for n, _ in tests))
        return 0
    known = dict(tests)
    unknown = [a for a in args if a not in known]
    if unknown:
        print("unknown test(s): %s; known: %s" % (" ".join(unknown), " ".join(known)),
              file=sys.stderr)
        return 2
    selected = [(n, f) for n, f in tests if not args or n in args]
    if os.geteuid() != 0:
        for n, _ in selected:
            print("SKIP %s: needs root (%s)" % (n, root_why))
        print("0 passed, 0 failed, %d skipped" % len(selected))
        return 0
    run = run or run_one
    why = prepare() if prepare else None
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    for name, fn in selected:
        if why:
            status, line = "FAIL", "FAIL %s: setup: %s" % (name, why)
        else:
            status, line = run(name, fn)
            if status == "FAIL" and name in retry:
                first = line[len("FAIL %s: " % name):]
                print("RETRY %s: the first try failed: %s" % (name, first), flush=True)
                status, line = run(name, fn)
                if status == "PASS":
                    line += " [second try; the first failed: %s]" % first
        counts[status] += 1
        print(line, flush=True)
    print("%d passed, %d failed, %d skipped" % (counts["PASS"], counts["FAIL"], counts["SKIP"]))
    return 1 if counts["FAIL"] else 0


def verbose():
    """-v was given: tests print their progress and figures to stderr."""
    return bool(os.environ.get("TW_VERBOSE"))


# ---- EEVDF slices (Slice=) ----

_SCHED_SYSCALLS = {"x86_64": (315, 314), "aarch64": (275, 274)}  # sched_getattr, sched_setattr


def set_sched_slice(tid, ns):
    """Give a thread a custom EEVDF slice ourselves (0: the default), its policy and nice kept."""
    import ctypes
    import platform

    class Attr(ctypes.Structure):
        _fields_ = [("size", ctypes.c_uint32), ("policy", ctypes.c_uint32), ("flags", ctypes.c_uint64),
                    ("nice", ctypes.c_int32), ("priority", ctypes.c_uint32), ("runtime", ctypes.c_uint64),
                    ("deadline", ctypes.c_uint64), ("period", ctypes.c_uint64),
                    ("util_min", ctypes.c_uint32), ("util_max", ctypes.c_uint32)]

    get_nr, set_nr = _SCHED_SYSCALLS[platform.machine()]
    libc = ctypes.CDLL(None, use_errno=True)
    a = Attr()
    check(libc.syscall(get_nr, tid, ctypes.byref(a), ctypes.sizeof(a), 0) == 0,
          "sched_getattr(%d): errno %d" % (tid, ctypes.get_errno()))
    a.size, a.flags, a.runtime = ctypes.sizeof(a), 0, ns
    check(libc.syscall(set_nr, tid, ctypes.byref(a), 0) == 0,
          "sched_setattr(%d, %d ns): errno %d" % (tid, ns, ctypes.get_errno()))


def sched_slice(tid):
    """se.slice of a thread in ns (/proc/TID/sched), None when it is gone."""
    try:
        with open("/proc/%d/sched" % tid) as f:
            m = re.search(r"(?m)^se\.slice\s*:\s*(\d+)", f.read())
    except (FileNotFoundError, ProcessLookupError):
        return None
    check(m, "no se.slice in /proc/%d/sched (kernel before 6.12?)" % tid)
    return int(m.group(1))
