package remote_test

import (
	"github.com/missionweave/mwp-worker/coordinator"
	"github.com/missionweave/mwp-worker/remote"
)

var _ coordinator.Authority = (*remote.Authority)(nil)
