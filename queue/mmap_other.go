//go:build !linux

package queue

const mmapPopulate = 0
