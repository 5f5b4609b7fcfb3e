#!/usr/bin/python3
"""Integration tests of what the running daemon shows: `tailwarden status`
and the Prometheus endpoint.

nginx runs in a test cgroup under an open-loop load (loadgen, 2000 req/s);
`tailwarden run --dry-run` has a latency-critical policy over it and a
best-effort one over a sleeper. The tests check what a user would see:
status says `not running` (exit 3) before, the service, its cgroup id, a
p99 and knobs while running, `not running` after kill -9; traffic of a cgroup
no policy names is not sensed until a policy names it; a real Prometheus
scraping the endpoint with contrib/'s config and alert rules returns a
request rate above zero, the rules evaluate, and every metric and label
contrib/ uses is served; malformed requests
get HTTP errors; 500 idle connections to the endpoint do not slow the
control loop; a taken port and Metrics=no behave.

Usage: test_observe.py [-v] [TEST...]   (as root; prints PASS/FAIL/SKIP per
test and "N passed, N failed, N skipped"; exits 1 when a test failed).
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
import twtest as tw  # noqa: E402
from twtest import check, TestFailure  # noqa: E402

SERVER_CPU = 0
CLIENT_CPU = 1
RATE = 2000
PERIOD = "500ms"
PERIOD_S = 0.5
IDLE_CONNS = 500


def info(msg):
    if tw.verbose():
        tw.log(msg)


class Rig:
    """nginx in web, a sleeper in batch, policies and config in a tmpdir."""

    def __init__(self, sess, metrics=True):
        self.sess = sess
        self.web = sess.cgroup("web")
        self.batch = sess.cgroup("batch")
        self.nginx = sess.nginx(self.web, cpu=SERVER_CPU)
        sess.sleeper(self.batch)
        self.dir = sess.tmpdir("observe")
        self.port = tw.free_port() if metrics else None
        self.state = os.path.join(self.dir, "state")
        self.pol = os.path.join(self.dir, "policies")
        os.makedirs(self.pol)
        with open(os.path.join(self.pol, "web.policy"), "w") as f:
            f.write("[Service]\nCgroup=%s\nClass=latency-critical\n"
                    "[Objective]\nPercentile=99\nTarget=20ms\nMinRequests=50\nWindow=1s\n"
                    % self.web.rel)
        with open(os.path.join(self.pol, "batch.policy"), "w") as f:
            f.write("[Service]\nCgroup=%s\nClass=best-effort\n"
                    "[Limits]\nCPUWeight=1..100\nCPUQuota=5%%..max\n" % self.batch.rel)
        self.conf = os.path.join(self.dir, "tailwarden.conf")
        self.write_conf("127.0.0.1:%d" % self.port if metrics else "no")
        self.proc = None

    def write_conf(self, metrics, extra=""):
        with open(self.conf, "w") as f:
            f.write("[Controller]\nPeriod=%s\nStateDir=%s\nDecisionLog=%s/decisions.jsonl\n"
                    "DryRun=yes\nMetrics=%s\n%s" % (PERIOD, self.state, self.dir, metrics, extra))

    def run(self, expect_running=True, cpu=None, env=None):
        self.log = open(os.path.join(self.dir, "run.log"), "w+")
        p = self.sess.spawn([tw.TAILWARDEN, "run", "--config", self.conf, "--policies", self.pol],
                            stdout=self.log, stderr=subprocess.STDOUT, cpu=cpu,
                            env=dict(os.environ, **env) if env else None)
        self.proc = p
        deadline = time.monotonic() + 20
        while "running:" not in self.log_text():
            if p.poll() is not None:
                if expect_running:
                    raise TestFailure("tailwarden run exited %s: %s" % (p.returncode, self.log_text()))
                return p
            if time.monotonic() > deadline:
                raise TestFailure("tailwarden run not running after 20 s: %s" % self.log_text())
            time.sleep(0.1)
        return p

    def log_text(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def status(self, *extra, env=None):
        r = subprocess.run([tw.TAILWARDEN, "status", "--config", self.conf] + list(extra),
                           capture_output=True, text=True, timeout=10,
                           env=dict(os.environ, **env) if env else None)
        return r.returncode, r.stdout, r.stderr

    def status_json(self):
        rc, out, err = self.status("--json")
        check(rc == 0, "status --json exited %d: %s %s" % (rc, out, err))
        return json.loads(out)

    def url(self, path="/metrics"):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def load(self, seconds):
        return self.sess.loadgen("http", self.nginx.port, RATE, seconds, conns=8, cpu=CLIENT_CPU,
                                 background=True)

    def wait_window(self, timeout=15):
        """Until status shows a p99 for web."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = self.status_json()
            web = [s for s in st["services"] if s["name"] == "web"]
            if web and web[0]["p99_us"] is not None:
                return st
            time.sleep(0.5)
        raise TestFailure("no p99 for web in status after %d s: %s" % (timeout, st))


def http(method, url, data=None, timeout=5):
    req = urllib.request.Request(url, data=data, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), dict(e.headers)


def parse_metrics(text):
    """{(name, frozenset(labels)): value} of an exposition text."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, _, val = line.rpartition(" ")
        name, labels = head, {}
        if "{" in head:
            name, rest = head.split("{", 1)
            for part in rest.rstrip("}").split('",'):
                if "=" in part:
                    k, v = part.split("=", 1)
                    labels[k] = v.strip('"')
        out[(name, frozenset(labels.items()))] = float(val)
    return out


def metric(m, name, **labels):
    for (n, ls), v in m.items():
        if n == name and all((k, v2) in ls for k, v2 in labels.items()):
            return v
    return None


# -- status -------------------------------------------------------------------

def test_status():
    with tw.Session(("unified", "cpu", "cpuacct"), tag="status") as sess:
        rig = Rig(sess)
        rc, out, _ = rig.status()
        check(rc == 3 and out.strip() == "not running",
              "before start: exit %d, %r (want 3, 'not running')" % (rc, out))
        rc, out, _ = rig.status("--json")
        check(rc == 3 and json.loads(out)["running"] is False, "before start, --json: %d %r" % (rc, out))
        # A level that is none: said, and the command goes on.
        rc, out, err = rig.status(env={"TAILWARDEN_LOG_LEVEL": "loud"})
        check(rc == 3 and "Ignoring TAILWARDEN_LOG_LEVEL=loud: not a level" in err,
              "TAILWARDEN_LOG_LEVEL=loud: exit %d, stderr %r" % (rc, err))
        # At the debug level every window's verdict is logged, not only a new kind's.
        p = rig.run(env={"TAILWARDEN_LOG_LEVEL": "debug"})
        load = rig.load(12)
        st = rig.wait_window()
        for k in ("running", "pid", "dry_run", "period_s", "services", "last_actions"):
            check(k in st, "status --json lacks %r: %s" % (k, st))
        check(st["running"] is True and st["pid"] == p.pid and st["dry_run"] is True
              and abs(st["period_s"] - PERIOD_S) < 1e-9, "status header wrong: %s" % st)
        web = [s for s in st["services"] if s["name"] == "web"][0]
        batch = [s for s in st["services"] if s["name"] == "batch"][0]
        for k in ("name", "class", "cgroup", "cgroup_id", "target_us", "p99_us", "rps", "slack",
                  "verdict", "knobs"):
            check(k in web, "service lacks %r: %s" % (k, web))
        check(web["cgroup_id"] == rig.web.inode, "web cgroup_id %s, the cgroup's inode is %d"
              % (web["cgroup_id"], rig.web.inode))
        check(web["cgroup"] == rig.web.rel, "web cgroup %r, want %r" % (web["cgroup"], rig.web.rel))
        check(web["class"] == "latency-critical" and web["target_us"] == 20000,
              "web class/target: %s" % web)
        check(web["p99_us"] > 0 and web["rps"] > RATE / 4, "web p99 %s us, %s req/s" % (web["p99_us"], web["rps"]))
        check(batch["target_us"] is None and batch["p99_us"] is None and batch["slack"] is None,
              "best-effort fields that do not apply must be null: %s" % batch)
        knobs = {k["knob"]: k for k in batch["knobs"]}
        check(set(knobs) == {"cpu.max", "cpu.weight"}, "batch knobs: %s" % batch["knobs"])
        for k in knobs.values():
            for f in ("value", "original", "ours"):
                check(f in k, "knob lacks %r: %s" % (f, k))
            check(k["ours"] is False, "dry-run: no knob is ours: %s" % k)
        check(knobs["cpu.weight"]["value"] == 100, "batch cpu.weight %s (cpu.shares 1024 -> 100)" % knobs["cpu.weight"])
        rc, text, _ = rig.status()
        check(rc == 0, "status exited %d" % rc)
        for want in ("running (pid %d)" % p.pid, "dry-run", "● web", "id %d" % rig.web.inode,
                     "p99", "cpu.weight", "request_cgroups"):
            check(want in text, "status lacks %r:\n%s" % (want, text))
        info("status:\n" + text)
        # SIGHUP with a bad policy set: kept out, and visible.
        with open(os.path.join(rig.pol, "bad.policy"), "w") as f:
            f.write("[Service]\nCgroup=/nope\nClass=sometimes\n")
        os.kill(p.pid, signal.SIGHUP)
        deadline = time.monotonic() + 5
        while rig.status_json()["reload_error"] is None and time.monotonic() < deadline:
            time.sleep(0.2)
        st = rig.status_json()
        check(st["reload_error"] and "bad.policy" in st["reload_error"],
              "a rejected reload is not in status: %s; log: %s" % (st["reload_error"], rig.log_text()[-1500:]))
        rc, text, _ = rig.status()
        check("REJECTED" in text, "human status does not show the rejected reload:\n%s" % text)
        os.unlink(os.path.join(rig.pol, "bad.policy"))
        load.result(timeout=40)
        verdicts = [ln for ln in rig.log_text().splitlines()
                    if ln.startswith("tailwarden: service web: large slack: ")]
        check(len(verdicts) >= 5, "TAILWARDEN_LOG_LEVEL=debug: %d verdicts of web's logged in 12 s "
              "of load with 1-s windows (want >= 5):\n%s" % (len(verdicts), rig.log_text()[-2000:]))
        # kill -9: the file stays, status must still say not running.
        os.kill(p.pid, signal.SIGKILL)
        p.wait(5)
        check(os.path.exists(os.path.join(rig.state, "status.json")), "status.json gone after kill -9?")
        rc, out, _ = rig.status()
        check(rc == 3 and out.strip() == "not running", "after kill -9: exit %d, %r" % (rc, out))
        # A clean stop removes the file.
        p = rig.run()
        check(rig.status()[0] == 0, "status not running after restart")
        sess.stop(p)
        check(not os.path.exists(os.path.join(rig.state, "status.json")), "status.json left after SIGTERM")
        rc, out, _ = rig.status()
        check(rc == 3, "after SIGTERM: exit %d" % rc)
        # A forged file, pid of a live process that is not tailwarden.
        os.makedirs(rig.state, exist_ok=True)
        with open(os.path.join(rig.state, "status.json"), "w") as f:
            f.write(json.dumps({"pid": os.getpid()}))
        rc, out, err = rig.status()
        check(rc == 3 and "not a valid status file" in err, "a malformed status file: exit %d %r %r" % (rc, out, err))
        return "web p99 %.0f us at %.0f req/s; cgroup id %d" % (web["p99_us"], web["rps"], web["cgroup_id"])


def nginx_accepts(port):
    """nginx's count of connections accepted so far (stub_status), this one included."""
    with urllib.request.urlopen("http://127.0.0.1:%d/nginx_status" % port, timeout=5) as r:
        return int(r.read().decode().splitlines()[2].split()[0])


def test_unnamed():
    """Only the policies' cgroups are sensed: a second nginx in a cgroup no
    policy names, under load since before `run` started, has no entry in
    the request sensor's table (the metric and status show 1 cgroup, web,
    whose connections also predate `run`). A policy for it added by
    SIGHUP sees its requests on the connections it already had: nginx's
    own count of accepted connections shows none new but ours."""
    with tw.Session(("unified", "cpu", "cpuacct"), tag="unnamed") as sess:
        rig = Rig(sess)
        other_cg = sess.cgroup("other")
        other = sess.nginx(other_cg, cpu=SERVER_CPU)
        web_load = rig.load(30)
        other_load = sess.loadgen("http", other.port, RATE, 30, conns=8, cpu=CLIENT_CPU,
                                  background=True)
        time.sleep(1)  # both loads' connections open before run
        p = rig.run()
        st = rig.wait_window()
        web = [s for s in st["services"] if s["name"] == "web"][0]
        check(web["rps"] > RATE / 4,
              "web's connections opened before run: %s req/s seen, %d offered" % (web["rps"], RATE))
        time.sleep(2 * PERIOD_S)
        m = parse_metrics(http("GET", rig.url())[1])
        entries = metric(m, "tailwarden_map_entries", map="request_cgroups")
        check(entries == 1, "request sensor table: %s cgroups, want 1 (web; not the unnamed "
              "nginx under %d req/s, nor the metrics endpoint's own connections)" % (entries, RATE))
        before = nginx_accepts(other.port)
        with open(os.path.join(rig.pol, "other.policy"), "w") as f:
            f.write("[Service]\nCgroup=%s\nClass=latency-critical\n"
                    "[Objective]\nPercentile=99\nTarget=20ms\nMinRequests=50\nWindow=1s\n"
                    % other_cg.rel)
        os.kill(p.pid, signal.SIGHUP)
        deadline, seen = time.monotonic() + 10, None
        while time.monotonic() < deadline:
            o = [s for s in rig.status_json()["services"] if s["name"] == "other"]
            seen = o[0] if o else None
            if seen and seen["rps"] and seen["rps"] > RATE / 4:
                break
            time.sleep(0.5)
        after = nginx_accepts(other.port)
        check(seen and seen["rps"] and seen["rps"] > RATE / 4,
              "a policy added by SIGHUP: %s req/s seen on the unnamed nginx's open connections "
              "(%d offered): %s" % (seen and seen["rps"], RATE, rig.log_text()[-1500:]))
        check(after - before == 1, "the unnamed nginx accepted %d connections besides ours meanwhile: "
              "the policy saw new connections, not the old ones" % (after - before - 1))
        info("web %.0f req/s; table %d cgroup(s) with the unnamed nginx loaded; other after SIGHUP "
             "%.0f req/s on %d old connections" % (web["rps"], entries, seen["rps"], 8))
        sess.stop(p)
        web_load.result(timeout=40)
        other_load.result(timeout=40)
        return "web %.0f req/s, table 1 cgroup beside the unnamed nginx; other %.0f req/s after SIGHUP" % (
            web["rps"], seen["rps"])


# -- Prometheus ---------------------------------------------------------------

def prometheus(sess, target_port):
    prom = shutil.which("prometheus")
    if not prom:
        raise tw.SetupError("prometheus not installed (Debian package prometheus)")
    d = sess.tmpdir("prom")
    port = tw.free_port()
    # The shipped scrape config and alert rules, at 1 s and on the test's port.
    contrib = os.path.join(tw.REPO, "contrib", "prometheus")
    with open(os.path.join(contrib, "prometheus.yml")) as f:
        conf = f.read()
    for a, b in (("'127.0.0.1:9477'", "'127.0.0.1:%d'" % target_port), ("scrape_interval: 15s", "scrape_interval: 1s"),
                 ("evaluation_interval: 15s", "evaluation_interval: 1s"), ("scrape_interval: 5s", "scrape_interval: 1s"),
                 ("scrape_timeout: 4s", "scrape_timeout: 1s")):
        check(a in conf, "contrib/prometheus/prometheus.yml lacks %r" % a)
        conf = conf.replace(a, b)
    with open(os.path.join(d, "prometheus.yml"), "w") as f:
        f.write(conf)
    shutil.copy(os.path.join(contrib, "tailwarden.rules.yml"), d)
    log = open(os.path.join(d, "prometheus.log"), "w")
    p = sess.spawn([prom, "--config.file", os.path.join(d, "prometheus.yml"),
                    "--storage.tsdb.path", os.path.join(d, "data"),
                    "--web.listen-address", "127.0.0.1:%d" % port],
                   stdout=log, stderr=subprocess.STDOUT)
    tw.wait_port(port, p, timeout=30)
    return p, port


def prom_query(port, q):
    url = "http://127.0.0.1:%d/api/v1/query?%s" % (port, urllib.parse.urlencode({"query": q}))
    with urllib.request.urlopen(url, timeout=5) as r:
        doc = json.loads(r.read())
    check(doc.get("status") == "success", "prometheus query %s: %s" % (q, doc))
    return doc["data"]["result"]


def test_prometheus():
    with tw.Session(("unified", "cpu", "cpuacct"), tag="prom") as sess:
        rig = Rig(sess)
        rig.run()
        load = rig.load(25)
        prom, pport = prometheus(sess, rig.port)
        # Scrape latency under the load, from here.
        lat = []
        for _ in range(20):
            t0 = time.monotonic()
            code, body, hdr = http("GET", rig.url())
            lat.append(time.monotonic() - t0)
            check(code == 200, "GET /metrics: %d" % code)
            time.sleep(0.1)
        check(hdr.get("Content-Type", "").startswith("text/plain; version=0.0.4"),
              "content type %r" % hdr.get("Content-Type"))
        lat.sort()
        q = 'rate(tailwarden_requests_total{cgroup="%s"}[5s])' % rig.web.rel
        deadline = time.monotonic() + 25
        res = []
        while time.monotonic() < deadline:
            res = prom_query(pport, q)
            if res and float(res[0]["value"][1]) > 0.8 * RATE:  # the window all under load
                break
            time.sleep(1)
        check(res and float(res[0]["value"][1]) > 0, "prometheus: %s -> %s" % (q, res))
        rate = float(res[0]["value"][1])
        tw.log("prometheus: %s -> %.0f req/s (%s)" % (q, rate, res[0]["metric"]))
        hq = 'histogram_quantile(0.99, rate(tailwarden_request_duration_seconds_bucket{cgroup="%s"}[5s]))' % rig.web.rel
        h = prom_query(pport, hq)
        tw.log("prometheus: %s -> %s" % (hq, h[0]["value"][1] if h else h))
        up = prom_query(pport, 'up{job="tailwarden"}')
        check(up and up[0]["value"][1] == "1", "up: %s" % up)
        # The shipped alert rules evaluate on the real series, and none of
        # the daemon-health ones is pending or firing for a healthy daemon.
        with urllib.request.urlopen("http://127.0.0.1:%d/api/v1/rules" % pport, timeout=5) as r:
            rules = [ru for g in json.loads(r.read())["data"]["groups"] for ru in g["rules"]]
        check(len(rules) >= 5 and all(ru["health"] == "ok" for ru in rules),
              "contrib rules: %s" % [(ru["name"], ru["health"], ru.get("lastError")) for ru in rules])
        active = [a["labels"]["alertname"] for ru in rules for a in ru.get("alerts", [])]
        check(not set(active) & {"TailwardenDown", "TailwardenAbsent", "TailwardenLoopStalled",
                                  "TailwardenTickSlow", "TailwardenReloadRejected"},
              "alerts active on a healthy daemon: %s" % active)
        # Every metric and label contrib/ uses is one this daemon serves.
        c = subprocess.run([os.path.join(tw.REPO, "tests", "check_contrib.py"), "--metrics", rig.url()],
                           capture_output=True, text=True, timeout=30)
        check(c.returncode == 0, "contrib against the live /metrics:\n%s%s" % (c.stdout, c.stderr))
        lg = load.result(timeout=40)
        tw.log("loadgen: %s req sent, %s completed in %s s" % (lg.get("sent"), lg.get("completed"), lg.get("duration_s")))
        sess.stop(prom)
        check(rate > RATE / 4, "rate %.0f req/s, loadgen offered %d" % (rate, RATE))
        return ("prometheus rate %.0f req/s (offered %d); %d contrib rules ok; /metrics scrape p50 %.1f ms max %.1f ms, %d bytes"
                % (rate, RATE, len(rules), lat[len(lat) // 2] * 1e3, lat[-1] * 1e3, len(body)))


# -- the endpoint -------------------------------------------------------------

def test_endpoint():
    with tw.Session(("unified", "cpu", "cpuacct"), tag="endpoint") as sess:
        rig = Rig(sess)
        p = rig.run()
        time.sleep(1.5)
        code, body, _ = http("GET", rig.url())
        check(code == 200, "GET /metrics: %d" % code)
        m = parse_metrics(body)
        for name in ("tailwarden_build_info", "tailwarden_requests_total", "tailwarden_request_duration_seconds_bucket",
                     "tailwarden_objective_seconds", "tailwarden_knob_value", "tailwarden_actions_total",
                     "tailwarden_sensor_drops_total", "tailwarden_map_entries", "tailwarden_map_capacity",
                     "tailwarden_tick_duration_seconds", "tailwarden_last_tick_timestamp_seconds"):
            check(metric(m, name) is not None, "/metrics lacks %s" % name)
        check(metric(m, "tailwarden_objective_seconds", service="web") == 0.02, "objective of web")
        # The TCP flow figures of web's cgroup (nginx's sockets), unless the
        # daemon said why its tcp_flows signal does not run (a kernel that
        # refuses the iterator: then no series of them at all, not zeros).
        tcp = ("tailwarden_tcp_sockets", "tailwarden_tcp_retransmitted_segments_total",
               "tailwarden_tcp_acked_bytes_total", "tailwarden_tcp_received_bytes_total")
        said = tw.tcp_flows_said(rig.log_text())
        if said:
            for name in tcp:
                check(metric(m, name, service="web") is None,
                      "%s of web served although the daemon said %r" % (name, said))
            tcp_flows = "no TCP flow series, as the daemon said (%s)" % said
        else:
            for name in tcp:
                v = metric(m, name, service="web")
                check(v is not None and v >= 0, "%s of web: %r" % (name, v))
            check("# TYPE tailwarden_tcp_sockets gauge\n" in body and
                  "# TYPE tailwarden_tcp_retransmitted_segments_total counter\n" in body,
                  "/metrics lacks the TCP flow figures' TYPE lines")
            tcp_flows = "TCP flow series of web served"
        code, body, hdr = http("HEAD", rig.url())
        check(code == 200, "HEAD /metrics: %d" % code)
        for method, path, want in (("GET", "/", 404), ("GET", "/metricsx", 404), ("POST", "/metrics", 405),
                                   ("DELETE", "/metrics", 405), ("PUT", "/x", 405)):
            code, _, hdr = http(method, rig.url(path), data=b"x" if method in ("POST", "PUT") else None)
            check(code == want, "%s %s: %d, want %d" % (method, path, code, want))
        # Garbage on the wire: an HTTP error or a close, and the server lives on.
        s = socket.create_connection(("127.0.0.1", rig.port), timeout=5)
        s.sendall(b"\x16\x03\x01 garbage \r\n\r\n")
        reply = s.recv(200)
        s.close()
        check(reply == b"" or reply.startswith(b"HTTP/1.1 4"), "garbage request got %r" % reply[:60])
        # 500 idle connections held open (the server serves 64 at a time; the
        # rest wait in the kernel's accept queue): the loop ticks on time.
        conns = []
        for _ in range(IDLE_CONNS):
            try:
                conns.append(socket.create_connection(("127.0.0.1", rig.port), timeout=2))
            except OSError:
                break
        held = len(conns)
        worst, oldest = 0.0, 0.0
        t_end = time.monotonic() + 4
        while time.monotonic() < t_end:
            st = rig.status_json()
            worst = max(worst, st["tick_duration_s"])
            oldest = max(oldest, time.time() - st["last_tick"])
            time.sleep(0.2)
        code_held = None
        try:
            code_held = http("GET", rig.url(), timeout=1)[0]
        except OSError:
            pass
        for c in conns:
            c.close()
        check(held == IDLE_CONNS, "only %d idle connections could be opened" % held)
        check(worst < PERIOD_S, "a tick took %.3f s with %d idle connections" % (worst, held))
        check(oldest < 2 * PERIOD_S, "last tick %.2f s old with %d idle connections" % (oldest, held))
        ticks_worst, age = worst, oldest
        info("with %d idle connections /metrics answered %s (the connection limit)" % (held, code_held))
        time.sleep(0.5)
        t1 = time.monotonic()
        code, body, _ = http("GET", rig.url())
        check(code == 200, "GET /metrics after the idle connections closed: %d" % code)
        m = parse_metrics(body)
        tick = metric(m, "tailwarden_tick_duration_seconds")
        check(p.poll() is None, "tailwarden exited")
        return ("%d idle connections: tick %.2f ms, last tick %.2f s old; /metrics after: %.1f ms, tick %.2f ms; %s"
                % (held, ticks_worst * 1e3, age, (time.monotonic() - t1) * 1e3, tick * 1e3, tcp_flows))


def test_port_taken():
    with tw.Session(("unified", "cpu", "cpuacct"), tag="port") as sess:
        rig = Rig(sess)
        s = socket.socket()
        s.bind(("127.0.0.1", rig.port))
        s.listen(1)
        p = rig.run(expect_running=False)
        p.wait(10)
        s.close()
        text = rig.log_text()
        check(p.returncode != 0, "started although the port was taken")
        check("in use" in text and "127.0.0.1:%d" % rig.port in text, "no clear message: %s" % text)
        check(not os.path.exists(os.path.join(rig.state, "status.json")), "status.json left behind")
        check(rig.status()[0] == 3, "status does not say not running")
        # Metrics=no: no listening socket of this process.
        rig.write_conf("no")
        p = rig.run()
        time.sleep(1)
        inodes = set()
        for fd in os.listdir("/proc/%d/fd" % p.pid):
            try:
                t = os.readlink("/proc/%d/fd/%s" % (p.pid, fd))
            except OSError:
                continue
            if t.startswith("socket:["):
                inodes.add(t[8:-1])
        listening = []
        for tab in ("/proc/net/tcp", "/proc/net/tcp6"):
            with open(tab) as f:
                for line in f.readlines()[1:]:
                    cols = line.split()
                    if cols[3] == "0A" and cols[9] in inodes:
                        listening.append(cols[1])
        check(not listening, "Metrics=no, yet listening on %s" % listening)
        check(rig.status()[0] == 0, "status with Metrics=no")
        sess.stop(p)
        return "taken port: %s; Metrics=no: no listening socket" % [
            l for l in text.splitlines() if "in use" in l][0].strip()


# -- the daemon's own CPUs ------------------------------------------------------
def cpus_of(pid):
    """{tid: the CPUs it may run on} of each of pid's threads."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            out[int(tid)] = frozenset(os.sched_getaffinity(int(tid)))
        except OSError:
            pass
    return out


def fmt_cpus(cpus):
    return ",".join(str(c) for c in sorted(cpus))


def wait_cpus(p, want, seconds):
    """Until every thread of p may run on exactly `want`; the last reading."""
    deadline = time.monotonic() + seconds
    while True:
        now = cpus_of(p.pid)
        if now and all(c == want for c in now.values()):
            return now
        if time.monotonic() > deadline:
            return now
        time.sleep(0.2)


def test_own_cpus():
    """AvoidServiceCPUs=yes: with nginx's threads allowed only CPU 0, every
    thread of the daemon keeps to the other CPUs, and says so; when nginx may
    run everywhere again, the daemon goes back to all it was given; it never
    widens what it was started with (taskset to CPU 0: stays there). Left out
    (the default, no), it stays on every CPU."""
    everything = frozenset(os.sched_getaffinity(0))
    if len(everything) < 2 or SERVER_CPU not in everything:
        raise tw.Skip("needs two CPUs, CPU %d among them; this process may run on %s"
                          % (SERVER_CPU, fmt_cpus(everything)))
    rest = everything - {SERVER_CPU}
    refresh = 5 + 2  # the daemon looks at the services' threads every 5 s
    with tw.Session(("unified", "cpu", "cpuacct"), tag="owncpus") as sess:
        rig = Rig(sess, metrics=False)
        rig.write_conf("no", "AvoidServiceCPUs=yes\n")
        nginx = sorted(rig.web.pids())
        check(nginx and all(os.sched_getaffinity(x) == {SERVER_CPU} for x in nginx),
              "nginx not pinned to CPU %d: %s" % (SERVER_CPU, nginx))
        p = rig.run()
        got = wait_cpus(p, rest, 3)
        check(all(c == rest for c in got.values()),
              "nginx on CPU %d only, yet the daemon's threads may run on %s (want %s)"
              % (SERVER_CPU, {t: fmt_cpus(c) for t, c in got.items()}, fmt_cpus(rest)))
        said = [l for l in rig.log_text().splitlines() if "keeping to CPUs" in l]
        check(said and "may run on %d" % SERVER_CPU in said[0],
              "the move off CPU %d is not said: %s" % (SERVER_CPU, rig.log_text()[-600:]))
        # nginx may run anywhere: the daemon goes back to all it was given.
        for pid in nginx:
            for tid in os.listdir("/proc/%d/task" % pid):
                os.sched_setaffinity(int(tid), everything)
        back = wait_cpus(p, everything, refresh)
        check(all(c == everything for c in back.values()),
              "nginx may run on every CPU, yet after %d s the daemon's threads may run on %s"
              % (refresh, {t: fmt_cpus(c) for t, c in back.items()}))
        again = [l for l in rig.log_text().splitlines() if "again, all I was given" in l]
        check(again, "the move back is not said: %s" % rig.log_text()[-600:])
        sess.stop(p)
        for pid in nginx:
            for tid in os.listdir("/proc/%d/task" % pid):
                os.sched_setaffinity(int(tid), {SERVER_CPU})
        # Started on CPU 0 only, where nginx is: nothing else to go to; never wider.
        p = rig.run(cpu=SERVER_CPU)
        time.sleep(1.5)
        pinned = cpus_of(p.pid)
        sess.stop(p)
        check(all(c == {SERVER_CPU} for c in pinned.values()),
              "started on CPU %d, the daemon's threads may run on %s"
              % (SERVER_CPU, {t: fmt_cpus(c) for t, c in pinned.items()}))
        # The default (no): where it was started, through a refresh.
        rig.write_conf("no")
        p = rig.run()
        time.sleep(refresh)
        off = cpus_of(p.pid)
        text = rig.log_text()
        sess.stop(p)
        check(all(c == everything for c in off.values()),
              "AvoidServiceCPUs= left out, yet the daemon's threads may run on %s"
              % {t: fmt_cpus(c) for t, c in off.items()})
        check("keeping to CPUs" not in text, "AvoidServiceCPUs= left out, yet: %s" % text)
        return ("nginx on CPU %d: the daemon's %d thread(s) on %s (\"%s\"); nginx anywhere: back "
                "on %s; started on CPU %d: stayed; by default: on %s"
                % (SERVER_CPU, len(got), fmt_cpus(rest), said[0].split("tailwarden: ")[-1],
                   fmt_cpus(everything), SERVER_CPU, fmt_cpus(everything)))


TESTS = [
    ("status", test_status),
    ("unnamed", test_unnamed),
    ("prometheus", test_prometheus),
    ("endpoint", test_endpoint),
    ("port_taken", test_port_taken),
    ("own_cpus", test_own_cpus),
]


def main(argv):
    def prepare():
        if not os.access(tw.TAILWARDEN, os.X_OK):
            return "%s not built (run make)" % tw.TAILWARDEN
        return None

    return tw.main(__doc__, TESTS, argv, "BPF, cgroups", prepare=prepare)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
