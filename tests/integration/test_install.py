#!/usr/bin/python3
"""`make install` / `make uninstall`, the man pages and the bash completion.

Installs into a scratch DESTDIR (never into this host's /usr or /etc) and
checks what a packager and an administrator would notice: every file where
it belongs, the unit pointing at the installed binary, man pages that render
without a warning and name every command `--help` names, a completion that
completes every command and option `--help` lists, an administrator's config
never overwritten (and kept by uninstall), and uninstall removing the rest.

Usage: test_install.py [-v] [TEST...]   (as root, like the other suites)
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
import twtest as tw  # noqa: E402
from twtest import check  # noqa: E402

EXPECTED = [
    "etc/tailwarden/tailwarden.conf",
    "usr/lib/systemd/system/tailwarden.service",
    "usr/sbin/tailwarden",
    "usr/share/bash-completion/completions/tailwarden",
    "usr/share/doc/tailwarden/README.md",
    "usr/share/doc/tailwarden/examples/example.policy",
    "usr/share/doc/tailwarden/examples/tailwarden.conf.example",
    "usr/share/man/man5/tailwarden.conf.5",
    "usr/share/man/man5/tailwarden.policy.5",
    "usr/share/man/man8/tailwarden.8",
]
BASH_COMPLETION = "/usr/share/bash-completion/bash_completion"


def make(*args, dest):
    r = subprocess.run(["make", "-s", "-C", tw.REPO] + list(args) + ["DESTDIR=" + dest, "PREFIX=/usr"],
                       capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, "make %s failed (%d): %s" % (" ".join(args), r.returncode,
                                                          r.stderr[-2000:]))


def files_under(d):
    out = []
    for root, _, names in os.walk(d):
        out += [os.path.relpath(os.path.join(root, n), d) for n in names]
    return sorted(out)


def commands():
    """The commands `tailwarden --help` lists, and each one's long options."""
    r = subprocess.run([tw.TAILWARDEN, "--help"], capture_output=True, text=True, timeout=10)
    cmds = re.findall(r"^  ([a-z]+)  ", r.stdout, re.M)
    check(len(cmds) >= 4, "no commands found in --help: %r" % r.stdout)
    opts = {}
    for c in cmds:
        h = subprocess.run([tw.TAILWARDEN, c, "--help"], capture_output=True, text=True, timeout=10)
        opts[c] = sorted(set(re.findall(r"(--[a-z][a-z-]+)", h.stdout)))
    return cmds, opts


def test_install_uninstall():
    """Every file in place; the unit runs the installed binary; uninstall removes it all."""
    dest = tempfile.mkdtemp(prefix="tailwarden-test-install-")
    try:
        make("install", dest=dest)
        got = [f for f in files_under(dest) if not f.startswith("usr/share/doc/tailwarden/")
               or f in EXPECTED]
        missing = [f for f in EXPECTED if f not in got]
        check(not missing, "not installed: %s (installed: %s)" % (missing, got))
        unit = open(os.path.join(dest, "usr/lib/systemd/system/tailwarden.service")).read()
        execs = re.findall(r"^Exec\w+=(\S+)", unit, re.M)
        check(execs and all(e in ("/usr/sbin/tailwarden", "/bin/kill") for e in execs),
              "the unit does not run the installed binary: %s" % execs)
        binary = os.path.join(dest, "usr/sbin/tailwarden")
        check(os.stat(binary).st_mode & 0o777 == 0o755, "binary mode %o" % os.stat(binary).st_mode)
        r = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10)
        check(r.returncode == 0 and "tailwarden" in r.stdout, "installed --version: %r" % r.stdout)
        docs = files_under(os.path.join(dest, "usr/share/doc/tailwarden"))
        make("uninstall", dest=dest)
        left = files_under(dest)
        check(not left, "left after uninstall: %s" % left)
        return "%d files installed (%d of them docs), none left after uninstall" % (
            len(got) - len([f for f in got if f.startswith("usr/share/doc/")]) + len(docs), len(docs))
    finally:
        shutil.rmtree(dest, ignore_errors=True)


def test_admin_config_kept():
    """An administrator's tailwarden.conf is never overwritten, nor removed by uninstall."""
    dest = tempfile.mkdtemp(prefix="tailwarden-test-install-")
    try:
        conf = os.path.join(dest, "etc/tailwarden/tailwarden.conf")
        os.makedirs(os.path.dirname(conf))
        mine = "[Controller]\nPeriod=2s\n"
        with open(conf, "w") as f:
            f.write(mine)
        make("install", dest=dest)
        check(open(conf).read() == mine, "install overwrote the administrator's config")
        make("uninstall", dest=dest)
        check(os.path.exists(conf) and open(conf).read() == mine,
              "uninstall removed or changed the administrator's config")
        left = files_under(dest)
        check(left == ["etc/tailwarden/tailwarden.conf"], "left after uninstall: %s" % left)
        return "kept through install and uninstall"
    finally:
        shutil.rmtree(dest, ignore_errors=True)


def test_man_pages():
    """The man pages render without a warning and name every command --help names."""
    cmds, opts = commands()
    pages = [os.path.join(tw.REPO, "man", p)
             for p in ("tailwarden.8", "tailwarden.policy.5", "tailwarden.conf.5")]
    for p in pages:
        r = subprocess.run(["groff", "-man", "-ww", "-z", p], capture_output=True, text=True, timeout=30)
        check(r.returncode == 0 and not r.stderr.strip(), "%s: groff warns: %s" % (p, r.stderr))
        r = subprocess.run(["man", "-l", p], capture_output=True, text=True, timeout=30,
                           env=dict(os.environ, MANWIDTH="80", MANPAGER="cat", PAGER="cat"))
        check(r.returncode == 0 and "SEE ALSO" in r.stdout, "%s: man -l: %s" % (p, r.stderr))
    page8 = subprocess.run(["man", "-l", pages[0]], capture_output=True, text=True, timeout=30,
                           env=dict(os.environ, MANWIDTH="200", MANPAGER="cat")).stdout
    synopsis = page8.split("DESCRIPTION")[0]
    absent = [c for c in cmds if "tailwarden %s" % c not in synopsis]
    check(not absent, "commands in --help but not in tailwarden(8)'s synopsis: %s" % absent)
    undocumented = [(c, o) for c in cmds for o in opts[c] if o != "--help" and o not in page8]
    check(not undocumented, "options in --help not in tailwarden(8): %s" % undocumented)
    return "3 pages render cleanly; %d commands and their options documented" % len(cmds)


def test_usage_exit():
    """Bad usage exits 2 with a pointer to --help, as tailwarden(8) says; --help exits 0."""
    cmds, _ = commands()
    bad = []
    for c in cmds:
        for args in (["--no-such-option"], ["--help"]):
            r = subprocess.run([tw.TAILWARDEN, c] + args, capture_output=True, text=True,
                               timeout=30)
            want = 0 if args == ["--help"] else 2
            if r.returncode != want or (want and "--help" not in r.stderr):
                bad.append("%s %s: exit %d, stderr %r" % (c, args[0], r.returncode, r.stderr[-200:]))
    for args in ([], ["no-such-command"]):
        r = subprocess.run([tw.TAILWARDEN] + args, capture_output=True, text=True, timeout=30)
        if r.returncode != 2 or "Usage:" not in r.stderr:
            bad.append("tailwarden %s: exit %d" % (" ".join(args), r.returncode))
    page8 = open(os.path.join(tw.REPO, "man", "tailwarden.8")).read()
    check("2 on bad usage" in page8, "tailwarden(8) no longer documents exit status 2")
    check(not bad, "bad usage not reported as tailwarden(8) says:\n  " + "\n  ".join(bad))
    return "%d commands: an unknown option exits 2 and names --help; --help exits 0" % len(cmds)


def complete(line):
    """What bash offers for the line (the cursor at its end)."""
    words = line.split(" ")
    script = ('source %s; source %s; COMP_WORDS=(%s); COMP_CWORD=%d; COMP_LINE=%s; '
              'COMP_POINT=${#COMP_LINE}; _tailwarden; printf "%%s\\n" "${COMPREPLY[@]}"'
              % (BASH_COMPLETION, os.path.join(tw.REPO, "contrib/bash-completion/tailwarden"),
                 " ".join("'%s'" % w for w in words), len(words) - 1, "'%s'" % line))
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)
    check(r.returncode == 0, "completion of %r failed: %s" % (line, r.stderr))
    return set(r.stdout.split())


def test_bash_completion():
    """The completion offers every command and every option `--help` lists."""
    if not os.path.exists(BASH_COMPLETION):
        raise tw.SetupError("%s missing (package bash-completion)" % BASH_COMPLETION)
    cmds, opts = commands()
    got = complete("tailwarden ")
    check(set(cmds) <= got, "commands not completed: %s (got %s)" % (set(cmds) - got, got))
    check(complete("tailwarden st") == {"status"}, "'st' completes to %s" % complete("tailwarden st"))
    missing = []
    for c in cmds:
        offered = complete("tailwarden %s --" % c)
        missing += ["%s %s" % (c, o) for o in opts[c] if o not in offered]
    check(not missing, "options not completed: %s" % missing)
    modes = complete("tailwarden top --mode ")
    check(modes == {"auto", "arrival", "receive", "syscall"}, "--mode offers %s" % modes)
    return "%d commands, %d options completed" % (len(cmds), sum(len(v) for v in opts.values()))


TESTS = [
    ("install_uninstall", test_install_uninstall),
    ("admin_config_kept", test_admin_config_kept),
    ("man_pages", test_man_pages),
    ("usage_exit", test_usage_exit),
    ("bash_completion", test_bash_completion),
]


def main(argv):
    def prepare():
        if not os.access(tw.TAILWARDEN, os.X_OK):
            return "%s not built (run make)" % tw.TAILWARDEN
        return None

    return tw.main(__doc__, TESTS, argv, "installs as root would", prepare=prepare)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
