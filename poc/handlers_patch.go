package poc

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// A tiny unified-diff writer and applier over in-memory trees (path →
// content), so the handlers and the reviewer need no git or patch binary.
// The applier is strict: context and removed lines must match exactly at
// the hunk's position; there is no fuzz. Paths use a/ and b/ prefixes and
// /dev/null for a created file.

// Tree is a project's files by slash-separated relative path.
type Tree map[string]string

// Clone returns a copy of t.
func (t Tree) Clone() Tree {
	c := make(Tree, len(t))
	for k, v := range t {
		c[k] = v
	}
	return c
}

// WriteTo writes every file of t under dir.
func (t Tree) WriteTo(dir string) error {
	for _, p := range t.paths() {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, []byte(t[p]), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (t Tree) paths() []string {
	ps := make([]string, 0, len(t))
	for p := range t {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	return ps
}

// ReadTree reads every regular file under dir.
func ReadTree(dir string) (Tree, error) {
	t := Tree{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		t[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	return t, err
}

// UnifiedDiff returns the diff turning old into new: files in both, added
// and removed, in path order. A changed file gets one hunk spanning its
// changed region with up to three lines of context.
func UnifiedDiff(old, new Tree) string {
	all := map[string]bool{}
	for p := range old {
		all[p] = true
	}
	for p := range new {
		all[p] = true
	}
	paths := make([]string, 0, len(all))
	for p := range all {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var b strings.Builder
	for _, p := range paths {
		o, inOld := old[p]
		n, inNew := new[p]
		if inOld && inNew && o == n {
			continue
		}
		from, to := "a/"+p, "b/"+p
		if !inOld {
			from = "/dev/null"
		}
		if !inNew {
			to = "/dev/null"
		}
		fmt.Fprintf(&b, "--- %s\n+++ %s\n", from, to)
		b.WriteString(hunk(splitLines(o), splitLines(n)))
	}
	return b.String()
}

// splitLines splits s into lines, each keeping its newline (the last one
// may lack it).
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	ls := strings.SplitAfter(s, "\n")
	if ls[len(ls)-1] == "" {
		ls = ls[:len(ls)-1]
	}
	return ls
}

// hunk writes the single hunk between a and b: common prefix and suffix
// become context (three lines at most), the middle is removed and added.
func hunk(a, b []string) string {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ctxPre, ctxSuf := min(pre, 3), min(suf, 3)
	start := pre - ctxPre
	oldN := len(a) - pre - suf + ctxPre + ctxSuf
	newN := len(b) - pre - suf + ctxPre + ctxSuf
	var w strings.Builder
	fmt.Fprintf(&w, "@@ -%s +%s @@\n", rangeOf(start, oldN), rangeOf(start, newN))
	line := func(prefix, l string) {
		w.WriteString(prefix)
		w.WriteString(strings.TrimSuffix(l, "\n"))
		w.WriteString("\n")
	}
	for _, l := range a[start:pre] {
		line(" ", l)
	}
	for _, l := range a[pre : len(a)-suf] {
		line("-", l)
	}
	for _, l := range b[pre : len(b)-suf] {
		line("+", l)
	}
	for _, l := range a[len(a)-suf : len(a)-suf+ctxSuf] {
		line(" ", l)
	}
	return w.String()
}

func rangeOf(start, n int) string {
	if n == 0 {
		return strconv.Itoa(start) + ",0"
	}
	return strconv.Itoa(start+1) + "," + strconv.Itoa(n)
}

// FileChange is one file a patch touches.
type FileChange struct {
	Path    string
	Created bool
	Deleted bool
	Added   []string // added lines, without the + prefix
	Removed []string
}

// ParsePatch parses a unified diff into the file changes it makes.
func ParsePatch(patch string) ([]FileChange, error) {
	changes, _, err := parsePatch(patch)
	return changes, err
}

func parsePatch(patch string) ([]FileChange, []filePatch, error) {
	lines := strings.SplitAfter(patch, "\n")
	var files []filePatch
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if l == "" || l == "\n" {
			continue
		}
		if !strings.HasPrefix(l, "--- ") {
			return nil, nil, fmt.Errorf("patch line %d: expected a --- header, got %q", i+1, strings.TrimSpace(l))
		}
		if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "+++ ") {
			return nil, nil, fmt.Errorf("patch line %d: --- without +++", i+1)
		}
		from, to := strings.TrimSpace(l[4:]), strings.TrimSpace(lines[i+1][4:])
		fp, err := newFilePatch(from, to)
		if err != nil {
			return nil, nil, fmt.Errorf("patch line %d: %w", i+1, err)
		}
		i += 2
		for i < len(lines) && strings.HasPrefix(lines[i], "@@ ") {
			h, next, err := parseHunk(lines, i)
			if err != nil {
				return nil, nil, err
			}
			fp.hunks = append(fp.hunks, h)
			i = next
		}
		i--
		if len(fp.hunks) == 0 {
			return nil, nil, fmt.Errorf("patch: %s has no hunk", fp.path)
		}
		files = append(files, fp)
	}
	if len(files) == 0 {
		return nil, nil, fmt.Errorf("patch: no file changes")
	}
	changes := make([]FileChange, len(files))
	for i, f := range files {
		c := FileChange{Path: f.path, Created: f.created, Deleted: f.deleted}
		for _, h := range f.hunks {
			for _, l := range h.lines {
				switch l[0] {
				case '+':
					c.Added = append(c.Added, l[1:])
				case '-':
					c.Removed = append(c.Removed, l[1:])
				}
			}
		}
		changes[i] = c
	}
	return changes, files, nil
}

type filePatch struct {
	path             string
	created, deleted bool
	hunks            []patchHunk
}

type patchHunk struct {
	oldStart, oldN int
	lines          []string // with their ' ', '-', '+' prefix, no newline
}

func newFilePatch(from, to string) (filePatch, error) {
	clean := func(p, prefix string) (string, error) {
		rest, ok := strings.CutPrefix(p, prefix)
		if !ok || rest == "" || strings.HasPrefix(rest, "/") || strings.Contains("/"+rest+"/", "/../") {
			return "", fmt.Errorf("unsafe or unprefixed path %q", p)
		}
		return rest, nil
	}
	switch {
	case from == "/dev/null" && to == "/dev/null":
		return filePatch{}, fmt.Errorf("both sides are /dev/null")
	case from == "/dev/null":
		p, err := clean(to, "b/")
		return filePatch{path: p, created: true}, err
	case to == "/dev/null":
		p, err := clean(from, "a/")
		return filePatch{path: p, deleted: true}, err
	}
	a, err := clean(from, "a/")
	if err != nil {
		return filePatch{}, err
	}
	b, err := clean(to, "b/")
	if err != nil {
		return filePatch{}, err
	}
	if a != b {
		return filePatch{}, fmt.Errorf("renames are not supported (%s → %s)", a, b)
	}
	return filePatch{path: a}, nil
}

func parseHunk(lines []string, i int) (patchHunk, int, error) {
	var os, on, ns, nn int
	head := strings.TrimSpace(lines[i])
	if _, err := fmt.Sscanf(head, "@@ -%d,%d +%d,%d @@", &os, &on, &ns, &nn); err != nil {
		return patchHunk{}, 0, fmt.Errorf("patch line %d: bad hunk header %q", i+1, head)
	}
	h := patchHunk{oldStart: os, oldN: on}
	seenOld, seenNew := 0, 0
	i++
	for ; i < len(lines) && (seenOld < on || seenNew < nn); i++ {
		l := strings.TrimSuffix(lines[i], "\n")
		if l == "" {
			return patchHunk{}, 0, fmt.Errorf("patch line %d: empty line inside a hunk", i+1)
		}
		switch l[0] {
		case ' ':
			seenOld++
			seenNew++
		case '-':
			seenOld++
		case '+':
			seenNew++
		default:
			return patchHunk{}, 0, fmt.Errorf("patch line %d: unexpected %q inside a hunk", i+1, l)
		}
		h.lines = append(h.lines, l)
	}
	if seenOld != on || seenNew != nn {
		return patchHunk{}, 0, fmt.Errorf("patch: hunk %q counts %d/%d lines, has %d/%d", head, on, nn, seenOld, seenNew)
	}
	return h, i, nil
}

// ApplyPatch returns t with patch applied, or an error naming the first
// file and line that does not match; t itself is never changed.
func ApplyPatch(t Tree, patch string) (Tree, []FileChange, error) {
	changes, files, err := parsePatch(patch)
	if err != nil {
		return nil, nil, err
	}
	out := t.Clone()
	for _, f := range files {
		cur, exists := out[f.path]
		switch {
		case f.created && exists:
			return nil, nil, fmt.Errorf("patch: %s already exists", f.path)
		case !f.created && !exists:
			return nil, nil, fmt.Errorf("patch: %s does not exist", f.path)
		}
		src := splitLines(cur)
		var dst []string
		pos := 0 // next unconsumed line of src
		for _, h := range f.hunks {
			at := h.oldStart - 1
			if h.oldN == 0 {
				at = h.oldStart
			}
			if at < pos || at > len(src) {
				return nil, nil, fmt.Errorf("patch: %s: hunk at line %d is out of order or past the end", f.path, h.oldStart)
			}
			dst = append(dst, src[pos:at]...)
			pos = at
			for _, l := range h.lines {
				body := l[1:] + "\n"
				switch l[0] {
				case ' ', '-':
					if pos >= len(src) || strings.TrimSuffix(src[pos], "\n") != l[1:] {
						return nil, nil, fmt.Errorf("patch: %s: line %d does not match the hunk", f.path, pos+1)
					}
					if l[0] == ' ' {
						dst = append(dst, body)
					}
					pos++
				case '+':
					dst = append(dst, body)
				}
			}
		}
		dst = append(dst, src[pos:]...)
		if f.deleted {
			if len(dst) != 0 {
				return nil, nil, fmt.Errorf("patch: %s: deletion leaves lines behind", f.path)
			}
			delete(out, f.path)
			continue
		}
		out[f.path] = strings.Join(dst, "")
	}
	return out, changes, nil
}
