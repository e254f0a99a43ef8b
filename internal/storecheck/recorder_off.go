//go:build !powerloss

package storecheck

import bolt "go.etcd.io/bbolt"

// withCommitRecord records nothing outside the powerloss build (recorder.go).
func withCommitRecord(_ string, opts *bolt.Options) *bolt.Options { return opts }
