"""Writing measured figures into docs/benchmarks.md and README.md.

The benchmarks own marked blocks of those pages:

    <!-- BEGIN bench:NAME (written by `make bench`: do not edit) -->
    ...
    <!-- END bench:NAME -->

write(PATH, {NAME: markdown}) replaces the blocks it is given and leaves
every other line as it was, so that a run of some sections keeps what the
others measured before. A block not yet in the page is appended at its
end. facts() is the line each block opens with: when, on which kernel and
host, and at which commit.
"""

import datetime
import os
import platform
import re
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(REPO, "docs", "benchmarks.md")
README = os.path.join(REPO, "README.md")


def _begin(name):
    return "<!-- BEGIN bench:%s (written by `make bench`: do not edit) -->" % name


def _end(name):
    return "<!-- END bench:%s -->" % name


def _read(path, default=""):
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return default


def cpu_model():
    for line in _read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def mitigations():
    """The Spectre v2 line in short: what makes every indirect call dear;
    and, where the CPU has one, the SRSO line: what makes every kernel
    return (so every BPF helper call) dear."""
    v2 = _read("/sys/devices/system/cpu/vulnerabilities/spectre_v2").strip()
    srso = _read("/sys/devices/system/cpu/vulnerabilities/spec_rstack_overflow").strip()
    out = v2.split(";")[0] if v2 else "unknown"
    if srso and srso != "Not affected":
        out += "; SRSO: %s" % srso
    return out


def commit():
    try:
        h = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                           capture_output=True, text=True, timeout=10).stdout.strip()
        # The pages the benchmarks write do not make the tree another one.
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no",
                                "--", ".", ":!docs/benchmarks.md", ":!README.md"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return (h + ("+changes" if dirty else "")) if h else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


COMMIT = commit()  # at the start of the run, before it writes any page


def facts():
    mem = 0
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            mem = int(line.split()[1]) // (1024 * 1024)
    return ("Measured %s UTC at commit %s; kernel %s, %d CPUs (%s), %d GiB, Spectre v2: %s."
            % (datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
               COMMIT, platform.release(), os.cpu_count() or 0, cpu_model(), mem,
               mitigations()))


def write(path, blocks):
    """Replace (or append) the named blocks of the page at path."""
    text = _read(path)
    for name, body in blocks.items():
        block = "%s\n%s\n%s" % (_begin(name), body.strip("\n"), _end(name))
        pat = re.compile(re.escape("<!-- BEGIN bench:%s " % name) + r".*?" +
                         re.escape(_end(name)), re.S)
        if pat.search(text):
            text = pat.sub(lambda _m: block, text, count=1)
        else:
            text = text.rstrip("\n") + "\n\n" + block + "\n"
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def md_table(header, rows):
    out = ["| " + " | ".join(str(h) for h in header) + " |",
           "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)
