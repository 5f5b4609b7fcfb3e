#!/usr/bin/python3
"""The documentation holds together: links resolve, the layout is the tree.

- Every relative link in README.md and docs/*.md names a file or folder of
  this tree (never one outside it), and every `#anchor` names a heading of
  the page it points to (GitHub's spelling of anchors).
- The layout in docs/hacking.md names every file of the product's folders
  (common/, bpf/, sensing/, policies/, knobs/, controller/, scripts/), and names no
  file that is not there.

Quick: no build, no root. Prints one line per problem and exits 1 if any.

Usage: tests/check_docs.py [REPO]   (default: the tree this script is in)
"""

import os
import re
import subprocess
import sys

LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LAYOUT_DIRS = ("common", "bpf", "sensing", "policies", "knobs", "controller", "scripts")


def strip_code(text):
    """The text without fenced code blocks and inline code spans, lines kept."""
    out, fence = [], None
    for line in text.split("\n"):
        m = re.match(r"^\s*(```+|~~~+)", line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            out.append("")
            continue
        if m:
            fence = m.group(1)
            out.append("")
            continue
        out.append(re.sub(r"(`+)(.+?)\1", lambda c: " " * len(c.group(0)), line))
    return "\n".join(out)


def slug(heading):
    """GitHub's anchor for a heading: lowercase, punctuation dropped, blanks to '-'."""
    s = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    s = s.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        found, seen = set(), {}
        for line in strip_code_keep_headings(open(path, encoding="utf-8").read()):
            m = HEADING.match(line)
            if not m:
                continue
            a = slug(m.group(2))
            n = seen.get(a, 0)
            seen[a] = n + 1
            found.add(a if n == 0 else "%s-%d" % (a, n))
        cache[path] = found
    return cache[path]


def strip_code_keep_headings(text):
    """Lines outside fenced code blocks (a '#' in a shell block is no heading)."""
    fence = None
    for line in text.split("\n"):
        m = re.match(r"^\s*(```+|~~~+)", line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        yield line


def check_links(repo, page):
    problems = []
    text = strip_code(open(page, encoding="utf-8").read())
    rel = os.path.relpath(page, repo)
    for lineno, line in enumerate(text.split("\n"), 1):
        for m in LINK.finditer(line):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, mailto:, ...
                continue
            where = "%s:%d: %s" % (rel, lineno, target)
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            if os.path.relpath(dest, repo).startswith(".."):
                problems.append("%s: outside the tree" % where)
                continue
            if not os.path.exists(dest):
                problems.append("%s: no such file" % where)
                continue
            if anchor:
                if not dest.endswith(".md") or os.path.isdir(dest):
                    problems.append("%s: an anchor into a file that is not markdown" % where)
                elif anchor not in anchors(dest):
                    problems.append("%s: no heading '#%s' in %s" % (where, anchor,
                                                                     os.path.relpath(dest, repo)))
    return problems


def tree_files(repo):
    """The files of the product's folders: tracked ones in a git checkout, else all."""
    r = subprocess.run(["git", "-C", repo, "ls-files", "--"] + list(LAYOUT_DIRS),
                       capture_output=True, text=True)
    if r.returncode == 0 and r.stdout.strip():
        files = set(r.stdout.split("\n")) - {""}
        # Files added but not yet committed count too, deleted ones do not.
        files = {f for f in files if os.path.exists(os.path.join(repo, f))}
        return files
    files = set()
    for d in LAYOUT_DIRS:
        for root, _, names in os.walk(os.path.join(repo, d)):
            files |= {os.path.relpath(os.path.join(root, n), repo) for n in names}
    return files


def layout_files(repo):
    """The files the layout block of docs/hacking.md names, in the product's folders."""
    text = open(os.path.join(repo, "docs", "hacking.md"), encoding="utf-8").read()
    m = re.search(r"^## Layout\n.*?^```\n(.*?)^```", text, re.S | re.M)
    if not m:
        return None
    named, folder = set(), None
    for line in m.group(1).split("\n"):
        if not line.strip():
            continue
        if not line.startswith(" "):
            folder = line.split()[0].rstrip("/")
            continue
        entry = line.split()[0]
        if folder not in LAYOUT_DIRS or entry.endswith("/"):
            continue
        b = re.match(r"^(.*)\.\{([^}]*)\}$", entry)
        for name in (["%s.%s" % (b.group(1), e) for e in b.group(2).split(",")] if b else [entry]):
            named.add("%s/%s" % (folder, name))
    return named


def check_layout(repo):
    named = layout_files(repo)
    if named is None:
        return ["docs/hacking.md: no '## Layout' section with a code block"]
    have = tree_files(repo)
    return (["docs/hacking.md: layout misses %s" % f for f in sorted(have - named)] +
            ["docs/hacking.md: layout names %s, which is not in the tree" % f
             for f in sorted(named - have)])


def main(argv):
    repo = os.path.abspath(argv[0] if argv else os.path.join(os.path.dirname(__file__), ".."))
    pages = [os.path.join(repo, "README.md")]
    docs = os.path.join(repo, "docs")
    pages += sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    problems = []
    for p in pages:
        problems += check_links(repo, p)
    problems += check_layout(repo)
    for p in problems:
        print(p)
    print("check_docs: %d pages, %s" % (len(pages), "%d problems" % len(problems)
                                         if problems else "every link resolves, the layout is the tree"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
