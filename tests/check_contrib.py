#!/usr/bin/python3
"""Check contrib/ against what the daemon serves at /metrics.

Without arguments (make contrib): the Grafana dashboard is valid JSON whose
panels all have a query, and every tailwarden_* metric the dashboard and the
alert rules name is a family controller/expo.c renders (with _bucket, _sum
and _count for its histograms).

With --metrics FILE or --metrics URL (test_observe.py does this on a live
daemon): also every metric they name has a sample in that exposition text,
and every label they use (in a selector, in by/without/on/ignoring, in a
legend's {{label}} or an annotation's $labels.label) is a label of a metric
in the same expression, or job/instance, which Prometheus adds.

Exits 1 naming the file, the panel or rule, and what is wrong.

Usage: tests/check_contrib.py [--metrics FILE|URL]   (from anywhere)
"""
import json
import os
import re
import sys
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXPO = os.path.join(REPO, "controller", "expo.c")
DASHBOARD = os.path.join(REPO, "contrib", "grafana", "tailwarden.json")
RULES = os.path.join(REPO, "contrib", "prometheus", "tailwarden.rules.yml")
NAME = re.compile(r"\b(?:tailwarden_[a-z0-9_]+|up)\b(?!\s*\()")
TARGET_LABELS = {"job", "instance"}
# Prometheus's own series, with the labels it gives them.
BUILTIN = {"up": {"job", "instance"}}


def exported():
    """The family names expo.c renders."""
    with open(EXPO) as f:
        src = f.read()
    names = set(re.findall(r'"(tailwarden_[a-z0-9_]+)"', src))
    for h in re.findall(r'"(tailwarden_[a-z0-9_]+)", "histogram"', src):
        names |= {h + "_bucket", h + "_sum", h + "_count"}
    return names


def live(source):
    """{name: set(label names)} of an exposition text (a file or a URL)."""
    if re.match(r"https?://", source):
        with urllib.request.urlopen(source, timeout=10) as r:
            text = r.read().decode()
    else:
        with open(source) as f:
            text = f.read()
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s", line)
        if not m:
            continue
        labels = set(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"', m.group(2) or ""))
        out.setdefault(m.group(1), set()).update(labels)
    return out


def queries():
    """(file, where, expr, labels used beside the expression) of the dashboard and the rules."""
    errors, out = [], []
    try:
        with open(DASHBOARD) as f:
            dash = json.load(f)
    except ValueError as e:
        return ["%s: not valid JSON: %s" % (DASHBOARD, e)], []
    for p in dash.get("panels", []):
        if p.get("type") == "row":
            continue
        targets = p.get("targets", [])
        if not targets or not all(t.get("expr") for t in targets):
            errors.append("%s: panel %r has no query" % (DASHBOARD, p.get("title")))
        for t in targets:
            if t.get("expr"):
                out.append((DASHBOARD, "panel %r" % p.get("title"), t["expr"],
                            set(re.findall(r"\{\{\s*(\w+)\s*\}\}", t.get("legendFormat", "")))))
    for v in dash.get("templating", {}).get("list", []):
        q = v.get("query")
        if isinstance(q, dict):
            q = q.get("query")
        if isinstance(q, str) and "label_values(" in q:
            m = re.search(r"label_values\((\w+),\s*(\w+)\)", q)
            if m:
                out.append((DASHBOARD, "variable %r" % v.get("name"), m.group(1), {m.group(2)}))
    # The rules: each expr with the $labels its annotations use.
    with open(RULES) as f:
        lines = f.readlines()
    rule, expr, used = None, None, set()
    for i, line in enumerate(lines + ["- alert: END\n"], 1):
        m = re.match(r"\s*- alert:\s*(\S+)", line)
        if m:
            if rule and expr:
                out.append((RULES, "alert %s (line %d)" % rule, expr, used))
            elif rule:
                errors.append("%s: alert %s (line %d) has no expr" % (RULES, rule[0], rule[1]))
            rule, expr, used = (m.group(1), i), None, set()
            continue
        m = re.match(r"\s*expr:\s*(.+)", line)
        if m:
            expr = m.group(1).strip()
        used |= set(re.findall(r"\$labels\.(\w+)", line))
    return errors, out


def check_labels(where, expr, extra, have):
    errors = []
    names = set(NAME.findall(expr))
    # Labels a selector puts on one metric.
    for name, body in re.findall(r"\b(tailwarden_[a-z0-9_]+|up)\s*\{([^}]*)\}", expr):
        for label in re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", body):
            if label not in have.get(name, set()) | TARGET_LABELS:
                errors.append("%s: %s selects %s on %s, which has only %s"
                              % (where, expr, label, name, sorted(have.get(name, set()))))
    # Labels grouped on, or shown: one of the expression's metrics must have them.
    union = set(TARGET_LABELS)
    for n in names:
        union |= have.get(n, set())
    grouped = set()
    for group in re.findall(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)", expr):
        grouped |= {g.strip() for g in group.split(",") if g.strip()}
    for label in sorted(grouped | extra):
        if label not in union:
            errors.append("%s: %s uses label %s, which none of %s has"
                          % (where, expr, label, sorted(names)))
    return errors


def main(argv):
    have = None
    if argv[:1] == ["--metrics"] and len(argv) == 2:
        have = live(argv[1])
        have.update(BUILTIN)
    elif argv:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    names = exported()
    errors, exprs = queries()
    for path, what, expr, extra in exprs:
        where = "%s: %s" % (path, what)
        for n in NAME.findall(expr):
            if n == "up":
                continue
            if n not in names:
                errors.append("%s uses %s, which controller/expo.c does not render" % (where, n))
            elif have is not None and n not in have:
                errors.append("%s uses %s, which the daemon's /metrics does not show" % (where, n))
        if have is not None:
            errors += check_labels(where, expr, extra, have)
    for e in errors:
        print(e)
    if not errors:
        print("contrib: dashboard valid JSON; %d queries and alert expressions name only metrics%s"
              % (len(exprs), " and labels the live /metrics serves" if have is not None
                 else " controller/expo.c renders"))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
