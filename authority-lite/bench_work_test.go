package authoritylite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/missionweave/mwp-worker/internal/clock"
	"github.com/missionweave/mwp-worker/protocol"
)

// BenchmarkPipelineWork is BenchmarkPipeline for the commands a worker
// and a coordinator send per WorkItem: authorize, offer, accept, start,
// one lease renewal with progress, submit and accept the result, seven
// commands and seven events that each touch the WorkItem, on one Group
// shared by 1, 8 and 64 clients, fsync on. One op is one WorkItem through
// its whole life; each client takes its WorkItems one after the other.
// The commands are signed with the clock stopped, each round's last three
// once its lease ids are known; the crypto floor verifies the same
// commands and signs one document of each size, with the same number of
// clients.
func BenchmarkPipelineWork(b *testing.B) {
	for _, clients := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			rounds := max(1, (b.N+clients-1)/clients)
			k := benchWorkService(b, clients)
			defer k.s.Close()
			ctx := context.Background()
			item := func(c, r int) string { return fmt.Sprintf("wi-%d-%d", c, r) }
			all := make([][][]byte, clients) // per client, in submission order
			var pipeline time.Duration
			run := func(build func(c int) [][]byte) {
				cmds := make([][][]byte, clients)
				for c := range clients {
					cmds[c] = build(c)
					all[c] = append(all[c], cmds[c]...)
				}
				b.StartTimer()
				start := time.Now()
				runParallel(clients, len(cmds[0]), func(c, i int) {
					if _, err := k.s.Submit(ctx, "", cmds[c][i]); err != nil {
						b.Error(err)
					}
				})
				pipeline += time.Since(start)
				b.StopTimer()
			}
			b.StopTimer()
			b.ResetTimer()
			for r := range rounds {
				run(func(c int) [][]byte {
					id, w := item(c, r), k.w[fmt.Sprint("wk", c)]
					ct := testContract(id)
					ct.Deadline = protocol.NewTime(k.clk.Now().Add(24 * time.Hour))
					ct.RetryPolicy.AttemptTimeoutMs, ct.RetryPolicy.CostLimit = 600000, 5
					now := k.clk.Now()
					return [][]byte{
						benchBuild(b, k.coord, protocol.CmdWorkAuthorize, &protocol.AuthorizeWorkPayload{WorkItemID: id, MissionID: "mis-a", Contract: ct}),
						benchBuild(b, k.coord, protocol.CmdWorkOffer, &protocol.OfferWorkPayload{WorkItemID: id, OfferID: "off-" + id, Contract: ct,
							Candidates: protocol.List[protocol.OfferCandidate]{{AgentID: w.Actor.ID, SelectionBasis: basis(now)}}, ExpiresAt: protocol.NewTime(now.Add(time.Minute))}),
						benchBuild(b, w, protocol.CmdWorkAcceptOffer, &protocol.AcceptOfferPayload{WorkItemID: id, OfferID: "off-" + id, ContractRevision: 1, ScheduleDisclosure: disclosure(now)}),
						benchBuild(b, w, protocol.CmdWorkStart, &protocol.StartWorkPayload{WorkItemID: id, OwnershipEpoch: 1}),
					}
				})
				run(func(c int) [][]byte {
					id, w := item(c, r), k.w[fmt.Sprint("wk", c)]
					wi, ok := k.s.WorkItem("grp-a", id)
					if !ok || wi.Lease == nil {
						b.Fatalf("%s has no lease", id)
					}
					return [][]byte{
						benchBuild(b, w, protocol.CmdLeaseRenew, &protocol.RenewLeasePayload{WorkItemID: id, OwnershipEpoch: 1, LeaseID: wi.Lease.LeaseID, Progress: progress(k.clk.Now())}),
						benchBuild(b, w, protocol.CmdWorkSubmit, &protocol.SubmitWorkPayload{WorkItemID: id, OwnershipEpoch: 1, LeaseID: wi.Lease.LeaseID,
							Artifacts: protocol.List[string]{protocol.Digest([]byte(id))}, Evidence: protocol.List[protocol.Evidence]{evidence(id, "ac-1", "ac-2")}}),
						benchBuild(b, k.coord, protocol.CmdWorkAcceptResult, &protocol.AcceptResultPayload{WorkItemID: id, ContractRevision: 1}),
					}
				})
			}
			if got := k.item(item(clients-1, rounds-1)).State; got != protocol.WorkVerified {
				b.Fatalf("last WorkItem is %s, want verified", got)
			}
			items := clients * rounds
			cryptoDur := cryptoFloor(b, k.s, all, clients)
			b.ReportMetric(float64(items)/pipeline.Seconds(), "items/s")
			b.ReportMetric(float64(7*items)/pipeline.Seconds(), "cmds/s")
			b.ReportMetric(cryptoDur.Seconds()/pipeline.Seconds(), "x_crypto_floor")
		})
	}
}

// benchWorkService is newSvc for benchmarks: fsync on, no rate limit, a
// coordinator and one worker per client (wk0, wk1, ...) in grp-a.
func benchWorkService(b *testing.B, clients int) *svc {
	b.Helper()
	k := &svc{t: b, dir: b.TempDir(), clk: clock.NewFake(t0), w: map[string]*Principal{}}
	k.akey = mustKey(b, protocol.ActorService, "authority-1")
	s, err := Open(Config{Dir: k.dir, Clock: k.clk, Key: k.akey, Limits: testLimits(), RateBurst: 1 << 30, RateEvery: time.Nanosecond})
	if err != nil {
		b.Fatal(err)
	}
	k.s = s
	hk := mustKey(b, protocol.ActorHuman, "alice")
	if err := s.AddPrincipal(protocol.ActorHuman, "alice", hk.Public()); err != nil {
		b.Fatal(err)
	}
	k.alice = s.Principal(owner, hk)
	k.coord = k.join("coord")
	k.ok(k.alice, protocol.CmdMissionCreate, &protocol.CreateMissionPayload{MissionID: "mis-a", Title: "t", Objective: "o", PriorityClass: protocol.PriorityNormal})
	k.ok(k.alice, protocol.CmdMissionAssignCoordinator, &protocol.AssignCoordinatorPayload{MissionID: "mis-a", AgentID: "coord", LeaseDurationMs: uint64((10 * time.Hour).Milliseconds())})
	for c := range clients {
		id := fmt.Sprint("wk", c)
		k.w[id] = k.join(id)
		k.ok(k.coord, protocol.CmdMembershipChange, &protocol.ChangeMembershipPayload{Principal: agent(id), Roles: protocol.List[protocol.Role]{protocol.RoleWorker}})
	}
	return k
}

func benchBuild(b *testing.B, p *Principal, typ protocol.CommandType, payload any) []byte {
	_, raw, err := p.Build(typ, "grp-a", payload)
	if err != nil {
		b.Fatal(err)
	}
	return raw
}
