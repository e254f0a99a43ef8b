package storecheck

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Holder names the process that holds the lock of the bbolt file at path
// (bbolt takes an flock on the file it opens): "process 1234 (mwp-worker
// authority serve --data d)". ok is false when it cannot tell: no such
// lock, or no /proc/locks (not Linux), or a holder in another PID
// namespace. Both stores name the holder this way when their open times
// out on the lock.
func Holder(path string) (pid int, what string, ok bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, "", false
	}
	st, isStat := fi.Sys().(*syscall.Stat_t)
	if !isStat {
		return 0, "", false
	}
	f, err := os.Open("/proc/locks")
	if err != nil {
		return 0, "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if pid, ok = lockHolder(sc.Text(), uint64(st.Dev), st.Ino); ok {
			return pid, describe(pid), true
		}
	}
	return 0, "", false
}

// lockHolder reads one line of /proc/locks ("1: FLOCK ADVISORY WRITE 1234
// 08:01:5678 0 EOF"; a "->" marks a waiter, not a holder) and returns
// its process when the lock is on the file dev, ino.
func lockHolder(line string, dev, ino uint64) (int, bool) {
	f := strings.Fields(line)
	if len(f) < 6 || f[1] == "->" {
		return 0, false
	}
	id := strings.Split(f[5], ":")
	if len(id) != 3 {
		return 0, false
	}
	major, err1 := strconv.ParseUint(id[0], 16, 32)
	minor, err2 := strconv.ParseUint(id[1], 16, 32)
	inode, err3 := strconv.ParseUint(id[2], 10, 64)
	pid, err4 := strconv.Atoi(f[4])
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || pid <= 0 || inode != ino ||
		major != devMajor(dev) || minor != devMinor(dev) {
		return 0, false
	}
	return pid, true
}

// devMajor and devMinor split a Linux dev_t as glibc's gnu_dev_major and
// gnu_dev_minor do.
func devMajor(dev uint64) uint64 { return (dev>>8)&0xfff | (dev>>32)&^0xfff }
func devMinor(dev uint64) uint64 { return dev&0xff | (dev>>12)&^0xff }

// describe is "process PID (its command line)", or without the command
// line when it cannot be read.
func describe(pid int) string {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	cmd := strings.TrimSpace(strings.ReplaceAll(string(raw), "\x00", " "))
	if err != nil || cmd == "" {
		return fmt.Sprintf("process %d", pid)
	}
	const maxCmd = 120
	if len(cmd) > maxCmd {
		cmd = cmd[:maxCmd] + "…"
	}
	return fmt.Sprintf("process %d (%s)", pid, cmd)
}
