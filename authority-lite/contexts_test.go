package authoritylite

import (
	"testing"

	"github.com/missionweave/mwp-worker/protocol"
)

// signedContext is version 1 of a package for wi-1 citing the log so far,
// edited by edit before the coordinator signs it.
func (k *svc) signedContext(artifacts []string, edit func(*protocol.ContextPackage)) protocol.ContextPackage {
	k.t.Helper()
	p := protocol.ContextPackage{PackageID: "ctx-wi-1", Version: 1,
		Scope:        protocol.ContextScope{MissionID: "mis-a", GroupID: "grp-a", WorkItemID: "wi-1"},
		SourceEvents: protocol.EventRange{GroupID: "grp-a", FromSequence: 1, ToSequence: k.s.LastSequence("grp-a")},
		Artifacts:    artifacts, Decisions: protocol.List[protocol.Decision]{}, Constraints: protocol.List[string]{},
		OpenQuestions: protocol.List[string]{}, Generator: protocol.Generator{AgentID: "coord", AgentVersion: "1.0.0"},
		GeneratedAt: protocol.NewTime(k.clk.Now())}
	if edit != nil {
		edit(&p)
	}
	signed, err := protocol.SignContextPackage(p, k.coord.Key)
	if err != nil {
		k.t.Fatal(err)
	}
	return signed
}

func chained(t *testing.T, prev protocol.ContextPackage) func(*protocol.ContextPackage) {
	d, err := protocol.ContextDigest(prev)
	if err != nil {
		t.Fatal(err)
	}
	return func(p *protocol.ContextPackage) {
		p.Version, p.PreviousVersion = prev.Version+1, &protocol.PackageVersionRef{Version: prev.Version, Digest: d}
	}
}

// TestContextPublishRows: what the service checks of a Context Package
// before the Group state machine decides it, each with its refusal.
func TestContextPublishRows(t *testing.T) {
	k := newSvc(t)
	w := k.toActive("wi-1")
	art := k.publish("w1", w, []byte("diff"))
	publish := func(p protocol.ContextPackage) error {
		_, err := k.do(k.coord, protocol.CmdContextPublish, &protocol.PublishContextPayload{Package: p})
		return err
	}
	refusals := []struct {
		name string
		pkg  func() protocol.ContextPackage
		code protocol.Code
	}{
		{"changed after signing", func() protocol.ContextPackage {
			p := k.signedContext([]string{art}, nil)
			p.Constraints = protocol.List[string]{"added later"}
			return p
		}, protocol.CodeAuthInvalidSignature},
		{"signed by another agent's key", func() protocol.ContextPackage {
			p := k.signedContext([]string{art}, nil)
			s, err := protocol.SignContextPackage(p, k.w["w1"].Key)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}, protocol.CodeAuthInvalidSignature},
		{"signature time is not generatedAt", func() protocol.ContextPackage {
			p := k.signedContext([]string{art}, nil)
			p.GeneratedAt = protocol.NewTime(p.GeneratedAt.Add(1e9))
			return p
		}, protocol.CodeAuthInvalidSignature},
		{"cites events past the log", func() protocol.ContextPackage {
			return k.signedContext([]string{art}, func(p *protocol.ContextPackage) { p.SourceEvents.ToSequence += 5 })
		}, protocol.CodeInvalidCommand},
		{"names an artifact never published", func() protocol.ContextPackage {
			return k.signedContext([]string{protocol.Digest([]byte("other"))}, nil)
		}, protocol.CodeInvalidCommand},
		{"scoped to another Mission", func() protocol.ContextPackage {
			return k.signedContext([]string{art}, func(p *protocol.ContextPackage) { p.Scope.MissionID = "mis-b" })
		}, protocol.CodeInvalidCommand},
	}
	for _, r := range refusals {
		if err := publish(r.pkg()); protocol.CodeOf(err) != r.code {
			t.Errorf("%s: got %v, want %s", r.name, err, r.code)
		}
	}
	v1 := k.signedContext([]string{art}, nil)
	if err := publish(v1); err != nil {
		t.Fatalf("version 1: %v", err)
	}
	bad := k.signedContext([]string{art}, func(p *protocol.ContextPackage) {
		chained(t, v1)(p)
		p.PreviousVersion.Digest = protocol.Digest([]byte("not v1"))
	})
	if err := publish(bad); protocol.CodeOf(err) != protocol.CodeInvalidCommand {
		t.Fatalf("broken chain: got %v, want INVALID_COMMAND", err)
	}
	if err := publish(k.signedContext([]string{art}, chained(t, v1))); err != nil {
		t.Fatalf("version 2: %v", err)
	}
	checkLog(t, k.s, "grp-a")
}

// TestContextHeadsSurviveReopen: the next version is checked against the
// current one after a restart, from the checkpoint or from the log.
func TestContextHeadsSurviveReopen(t *testing.T) {
	for _, every := range []uint64{0, 1} {
		k := newSvcEvery(t, every)
		k.toActive("wi-1")
		v1 := k.signedContext([]string{}, nil)
		k.ok(k.coord, protocol.CmdContextPublish, &protocol.PublishContextPayload{Package: v1})
		k.s.Close()
		k.s = openSvcEvery(t, k.dir, k.clk, k.akey, every)
		k.coord = k.s.Principal(agent("coord"), k.coord.Key)
		k.refuse(k.coord, protocol.CmdContextPublish, &protocol.PublishContextPayload{Package: k.signedContext([]string{}, nil)}, protocol.CodeRevisionConflict)
		k.ok(k.coord, protocol.CmdContextPublish, &protocol.PublishContextPayload{Package: k.signedContext([]string{}, chained(t, v1))})
	}
}
