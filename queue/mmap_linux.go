package queue

import "syscall"

// mmapPopulate prefaults the whole file at open: one sequential read instead
// of a page fault per random access (bbolt madvises MADV_RANDOM).
const mmapPopulate = syscall.MAP_POPULATE
