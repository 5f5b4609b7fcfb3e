"""What a running tailwarden holds in its BPF maps, read with bpftool."""

import json
import os
import re
import subprocess

# The per-cgroup maps of the request and contention sensors.
CG_MAPS = ("tw_cg_counters", "tw_cg_slots", "ct_cg_counters", "ct_cg_hists", "ct_cg_runq")


def occupancy(pid, maps=CG_MAPS):
    """Entries in each per-cgroup BPF map of process pid (its fds' map ids, counted by bpftool)."""
    out = {}
    fddir = "/proc/%d/fdinfo" % pid
    for fd in os.listdir(fddir):
        try:
            with open(os.path.join(fddir, fd)) as f:
                text = f.read()
        except OSError:
            continue
        m = re.search(r"^map_id:\s*(\d+)", text, re.M)
        if not m:
            continue
        mid = m.group(1)
        show = json.loads(subprocess.run(["bpftool", "-j", "map", "show", "id", mid],
                                         capture_output=True, text=True).stdout or "{}")
        name = show.get("name", "")
        if name in maps and name not in out:
            dump = subprocess.run(["bpftool", "-j", "map", "dump", "id", mid],
                                  capture_output=True, text=True).stdout
            out[name] = len(json.loads(dump or "[]"))
    return out


def rss_kib(pid):
    """Resident set size of pid in KiB (VmRSS)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return None
