package wss

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func popAll(o *outbox) []string {
	var got []string
	for {
		f, _, ok := o.pop()
		if !ok {
			return got
		}
		got = append(got, string(f))
	}
}

func TestOutboxRoundRobin(t *testing.T) {
	o := newOutbox(4, 4)
	ga, gb := o.reset("a"), o.reset("b")
	for i := range 3 {
		o.pushGroup("a", ga, []byte("a"+strconv.Itoa(i)))
	}
	o.pushGroup("b", gb, []byte("b0"))
	o.pushControl(context.Background(), []byte("c0"))
	o.pushGroup("b", gb, []byte("b1"))
	got := fmt.Sprint(popAll(o))
	// Lanes in the order they first had frames, one frame per turn.
	if want := "[a0 b0 c0 a1 b1 a2]"; got != want {
		t.Fatalf("order %s, want %s", got, want)
	}
}

func TestOutboxFullStaleAndFinish(t *testing.T) {
	o := newOutbox(2, 2)
	g := o.reset("a")
	for _, f := range []string{"1", "2"} {
		if r, _ := o.pushGroup("a", g, []byte(f)); r != pushed {
			t.Fatalf("push %s: %v", f, r)
		}
	}
	r, space := o.pushGroup("a", g, []byte("3"))
	if r != laneFull || space == nil {
		t.Fatalf("push into a full lane: %v", r)
	}
	if r, _ := o.pushGroup("nope", 1, []byte("x")); r != laneStale {
		t.Fatalf("push to an unknown lane: %v", r)
	}
	o.pop()
	select {
	case <-space:
	default:
		t.Fatal("space not signalled after draining to half")
	}
	g2 := o.reset("a")
	if r, _ := o.pushGroup("a", g, []byte("old")); r != laneStale {
		t.Fatalf("push of a replaced generation: %v", r)
	}
	if ok := o.pushControlFor(context.Background(), "a", g, []byte("old bp")); ok {
		t.Fatal("control frame of a replaced stream accepted")
	}
	if got := fmt.Sprint(popAll(o)); got != "[]" {
		t.Fatalf("reset kept frames: %s", got)
	}
	o.pushGroup("a", g2, []byte("e1"))
	o.pushControl(context.Background(), []byte("c1"))
	o.finish([]byte("last"))
	if r, _ := o.pushGroup("a", g2, []byte("e2")); r != laneStale {
		t.Fatal("group frame accepted after finish")
	}
	got := []string{}
	for {
		f, last, ok := o.pop()
		if !ok {
			break
		}
		got = append(got, string(f))
		if last {
			break
		}
	}
	if fmt.Sprint(got) != "[c1 last]" {
		t.Fatalf("finish sent %v, want replies then the final frame", got)
	}
}

func TestOutboxControlWaitsForSpace(t *testing.T) {
	o := newOutbox(1, 1)
	o.pushControl(context.Background(), []byte("c0"))
	done := make(chan bool)
	go func() { done <- o.pushControl(context.Background(), []byte("c1")) }()
	o.pop()
	if !<-done {
		t.Fatal("blocked control push failed")
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- o.pushControl(ctx, []byte("c2")) }()
	cancel()
	if <-done {
		t.Fatal("control push succeeded on a full lane after cancel")
	}
	go func() { done <- o.pushControl(context.Background(), []byte("c3")) }()
	o.close()
	select {
	case ok := <-done:
		if ok {
			t.Fatal("push accepted after close")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("close did not wake a waiting producer")
	}
}

// TestOutboxProperties checks, for random pushes, pops and resets: FIFO per
// lane, nothing lost or duplicated, lane bounds, stale generations
// refused, the space signal exactly when a full lane reaches half, and the
// round-robin bound (a lane with frames waits at most lanes-1 pops).
func TestOutboxProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		const capacity = 4
		groups := []string{"a", "b", "c"}
		o := newOutbox(capacity, capacity)
		gens := map[string]uint64{}
		model := map[string][]string{"": nil}
		spaces := map[string]<-chan struct{}{}
		wait := map[string]int{}
		for _, g := range groups {
			gens[g] = o.reset(g)
			model[g] = nil
		}
		next := 0
		t.Repeat(map[string]func(*rapid.T){
			"push": func(t *rapid.T) {
				g := rapid.SampledFrom(groups).Draw(t, "g")
				next++
				f := g + "-" + strconv.Itoa(next)
				r, space := o.pushGroup(g, gens[g], []byte(f))
				switch {
				case len(model[g]) < capacity && r == pushed:
					if len(model[g]) == 0 {
						wait[g] = 0
					}
					model[g] = append(model[g], f)
				case len(model[g]) == capacity && r == laneFull && space != nil:
					spaces[g] = space
				default:
					t.Fatalf("push to %s with %d queued: %v", g, len(model[g]), r)
				}
			},
			"control": func(t *rapid.T) {
				if len(model[""]) == capacity {
					t.Skip("would block")
				}
				next++
				f := "c-" + strconv.Itoa(next)
				if !o.pushControl(context.Background(), []byte(f)) {
					t.Fatal("control push refused")
				}
				if len(model[""]) == 0 {
					wait[""] = 0
				}
				model[""] = append(model[""], f)
			},
			"stale": func(t *rapid.T) {
				g := rapid.SampledFrom(groups).Draw(t, "g")
				if r, _ := o.pushGroup(g, gens[g]-1, []byte("stale")); r != laneStale {
					t.Fatalf("stale push: %v", r)
				}
			},
			"reset": func(t *rapid.T) {
				g := rapid.SampledFrom(groups).Draw(t, "g")
				gens[g] = o.reset(g)
				model[g] = nil
				if s := spaces[g]; s != nil {
					select {
					case <-s:
					default:
						t.Fatal("reset did not wake a waiter")
					}
					delete(spaces, g)
				}
			},
			"pop": func(t *rapid.T) {
				f, _, ok := o.pop()
				total := 0
				for _, q := range model {
					total += len(q)
				}
				if !ok {
					if total != 0 {
						t.Fatalf("pop found nothing with %d queued", total)
					}
					return
				}
				var lane string
				for l, q := range model {
					if len(q) > 0 && q[0] == string(f) {
						lane = l
						goto found
					}
				}
				t.Fatalf("popped %q, not the head of any lane %v", f, model)
			found:
				model[lane] = model[lane][1:]
				for l, q := range model {
					if l != lane && len(q) > 0 {
						wait[l]++
						if wait[l] > len(model)-1 {
							t.Fatalf("lane %q waited %d pops", l, wait[l])
						}
					}
				}
				wait[lane] = 0
				if s := spaces[lane]; s != nil {
					select {
					case <-s:
						if len(model[lane]) > capacity/2 {
							t.Fatalf("space signalled with %d queued", len(model[lane]))
						}
						delete(spaces, lane)
					default:
						if len(model[lane]) <= capacity/2 {
							t.Fatalf("space not signalled with %d queued", len(model[lane]))
						}
					}
				}
			},
			"": func(t *rapid.T) {
				for l, q := range model {
					if n := o.queued(l); n != len(q) {
						t.Fatalf("lane %q holds %d, model %d", l, n, len(q))
					}
				}
			},
		})
	})
}

func TestLiveness(t *testing.T) {
	o := Options{HandshakeTimeout: 10 * time.Second, IdleTimeout: 60 * time.Second, PingInterval: 20 * time.Second}
	at := func(d time.Duration) time.Time { return testStart.Add(d) }
	cases := []struct {
		name  string
		steps func(l *liveness) []verdict
		want  []verdict
	}{
		{"no HELLO in time", func(l *liveness) []verdict {
			return []verdict{l.tick(at(9 * time.Second)), l.tick(at(10 * time.Second))}
		}, []verdict{stayQuiet, expireNoHello}},
		{"traffic does not replace HELLO", func(l *liveness) []verdict {
			l.seen(at(9 * time.Second))
			return []verdict{l.tick(at(10 * time.Second))}
		}, []verdict{expireNoHello}},
		{"ping once per interval, then idle", func(l *liveness) []verdict {
			l.opened()
			return []verdict{
				l.tick(at(19 * time.Second)), l.tick(at(20 * time.Second)), l.tick(at(30 * time.Second)),
				l.tick(at(40 * time.Second)), l.tick(at(59 * time.Second)), l.tick(at(60 * time.Second)),
			}
		}, []verdict{stayQuiet, sendPing, stayQuiet, sendPing, stayQuiet, expireIdle}},
		{"traffic keeps it alive", func(l *liveness) []verdict {
			l.opened()
			l.seen(at(50 * time.Second))
			l.seen(at(40 * time.Second)) // out of order readings never move back
			return []verdict{l.tick(at(69 * time.Second)), l.tick(at(109 * time.Second)), l.tick(at(110 * time.Second))}
		}, []verdict{stayQuiet, sendPing, expireIdle}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.steps(newLiveness(testStart, o))
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}
