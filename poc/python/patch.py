"""Unified diffs over in-memory trees ({path: text}), as poc/handlers_patch.go
writes and applies them: one hunk per changed file with up to three lines
of context, a/ and b/ prefixes, /dev/null for a created or deleted file; the
applier is strict (no fuzz). The Python implementation, testing and
integration stages use it; poc.UnifiedDiff and poc.ApplyPatch are the Go
twins and a test keeps the two byte for byte the same."""

import re

HEAD = re.compile(r"^@@ -(\d+),(\d+) \+(\d+),(\d+) @@$")


def split_lines(s):
    """s as lines, each keeping its newline (the last may lack it)."""
    if not s:
        return []
    ls = s.split("\n")
    out = [l + "\n" for l in ls[:-1]]
    if ls[-1]:
        out.append(ls[-1])
    return out


def _chomp(l):
    return l[:-1] if l.endswith("\n") else l


def _range(start, n):
    return "%d,0" % start if n == 0 else "%d,%d" % (start + 1, n)


def _hunk(a, b):
    pre = 0
    while pre < len(a) and pre < len(b) and a[pre] == b[pre]:
        pre += 1
    suf = 0
    while suf < len(a) - pre and suf < len(b) - pre and a[len(a) - 1 - suf] == b[len(b) - 1 - suf]:
        suf += 1
    cpre, csuf = min(pre, 3), min(suf, 3)
    start = pre - cpre
    old_n = len(a) - pre - suf + cpre + csuf
    new_n = len(b) - pre - suf + cpre + csuf
    out = ["@@ -%s +%s @@\n" % (_range(start, old_n), _range(start, new_n))]

    def line(prefix, l):
        out.append(prefix + _chomp(l) + "\n")
    for l in a[start:pre]:
        line(" ", l)
    for l in a[pre:len(a) - suf]:
        line("-", l)
    for l in b[pre:len(b) - suf]:
        line("+", l)
    for l in a[len(a) - suf:len(a) - suf + csuf]:
        line(" ", l)
    return "".join(out)


def unified_diff(old, new):
    """The diff turning tree old into tree new, in path order."""
    out = []
    for p in sorted(set(old) | set(new), key=lambda p: p.encode("utf-8")):
        o, n = old.get(p), new.get(p)
        if o == n:
            continue
        out.append("--- %s\n+++ %s\n" % ("/dev/null" if o is None else "a/" + p, "/dev/null" if n is None else "b/" + p))
        out.append(_hunk(split_lines(o or ""), split_lines(n or "")))
    return "".join(out)


def _clean(p, prefix):
    rest = p[len(prefix):] if p.startswith(prefix) else ""
    if not rest or rest.startswith("/") or "/../" in "/" + rest + "/":
        raise ValueError("unsafe or unprefixed path %r" % p)
    return rest


def parse(patch):
    """[{path, created, deleted, hunks: [(old_start, old_n, [lines])]}] of a
    unified diff; ValueError names the first line that is wrong."""
    lines = [l + "\n" for l in patch.split("\n")]
    lines[-1] = lines[-1][:-1]
    files, i = [], 0
    while i < len(lines):
        l = lines[i]
        if l in ("", "\n"):
            i += 1
            continue
        if not l.startswith("--- "):
            raise ValueError("patch line %d: expected a --- header, got %r" % (i + 1, l.strip()))
        if i + 1 >= len(lines) or not lines[i + 1].startswith("+++ "):
            raise ValueError("patch line %d: --- without +++" % (i + 1))
        frm, to = l[4:].strip(), lines[i + 1][4:].strip()
        if frm == "/dev/null" and to == "/dev/null":
            raise ValueError("patch line %d: both sides are /dev/null" % (i + 1))
        if frm == "/dev/null":
            f = {"path": _clean(to, "b/"), "created": True, "deleted": False}
        elif to == "/dev/null":
            f = {"path": _clean(frm, "a/"), "created": False, "deleted": True}
        else:
            a, b = _clean(frm, "a/"), _clean(to, "b/")
            if a != b:
                raise ValueError("patch line %d: renames are not supported (%s -> %s)" % (i + 1, a, b))
            f = {"path": a, "created": False, "deleted": False}
        f["hunks"] = []
        i += 2
        while i < len(lines) and lines[i].startswith("@@ "):
            head = lines[i].strip()
            m = HEAD.match(head)
            if not m:
                raise ValueError("patch line %d: bad hunk header %r" % (i + 1, head))
            on, nn = int(m.group(2)), int(m.group(4))
            h, so, sn = [], 0, 0
            i += 1
            while i < len(lines) and (so < on or sn < nn):
                l = _chomp(lines[i])
                if not l:
                    raise ValueError("patch line %d: empty line inside a hunk" % (i + 1))
                if l[0] == " ":
                    so, sn = so + 1, sn + 1
                elif l[0] == "-":
                    so += 1
                elif l[0] == "+":
                    sn += 1
                else:
                    raise ValueError("patch line %d: unexpected %r inside a hunk" % (i + 1, l))
                h.append(l)
                i += 1
            if so != on or sn != nn:
                raise ValueError("patch: hunk %r counts %d/%d lines, has %d/%d" % (head, on, nn, so, sn))
            f["hunks"].append((int(m.group(1)), on, h))
        if not f["hunks"]:
            raise ValueError("patch: %s has no hunk" % f["path"])
        files.append(f)
    if not files:
        raise ValueError("patch: no file changes")
    return files


def apply(tree, patch):
    """(new tree, [changed paths]) of patch applied to tree, which is left
    as it was; ValueError names the first file and line that do not match."""
    files = parse(patch)
    out = dict(tree)
    for f in files:
        p = f["path"]
        if f["created"] and p in out:
            raise ValueError("patch: %s already exists" % p)
        if not f["created"] and p not in out:
            raise ValueError("patch: %s does not exist" % p)
        src, dst, pos = split_lines(out.get(p, "")), [], 0
        for old_start, old_n, lines in f["hunks"]:
            at = old_start if old_n == 0 else old_start - 1
            if at < pos or at > len(src):
                raise ValueError("patch: %s: hunk at line %d is out of order or past the end" % (p, old_start))
            dst.extend(src[pos:at])
            pos = at
            for l in lines:
                if l[0] in " -":
                    if pos >= len(src) or _chomp(src[pos]) != l[1:]:
                        raise ValueError("patch: %s: line %d does not match the hunk" % (p, pos + 1))
                    if l[0] == " ":
                        dst.append(l[1:] + "\n")
                    pos += 1
                else:
                    dst.append(l[1:] + "\n")
        dst.extend(src[pos:])
        if f["deleted"]:
            if dst:
                raise ValueError("patch: %s: deletion leaves lines behind" % p)
            del out[p]
            continue
        out[p] = "".join(dst)
    return out, [f["path"] for f in files]
