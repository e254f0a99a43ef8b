package bench

import (
	"maps"
	"slices"
)

// Growth is how a soak's readings moved: least-squares slopes over its
// samples (interval, mark and final readings alike), pure arithmetic on
// them (docs/shapes.md, "mwp-worker bench --duration").
type Growth struct {
	WarmupSeconds float64 `json:"warmupSeconds"`
	// Samples is how many readings the slopes after the warm-up use; with
	// fewer than 2 (or items that did not move) a slope is left out.
	Samples int `json:"samples"`
	// PerHour is each reading's slope against time after the warm-up
	// (readings at or after warmupSeconds), per hour.
	PerHour map[string]float64 `json:"perHour"`
	// PerItem is the same readings' slope against items.completed: what
	// one more completed item adds.
	PerItem map[string]float64 `json:"perItem"`
	// WarmupPerHour is the slope against time over the warm-up (readings
	// before warmupSeconds, and the first after it), per hour: the growth
	// PerHour is to be compared with.
	WarmupPerHour map[string]float64 `json:"warmupPerHour"`
}

// Readings flattens a sample's figures into named series
// ("authority.store.dbUsedBytes"); what was not measured is left out.
func Readings(s Sample) map[string]float64 {
	out := map[string]float64{
		"items.completed":          float64(s.Items.Completed),
		"groups.finished":          float64(s.Groups.Finished),
		"process.heapInuseBytes":   float64(s.Process.HeapInuseBytes),
		"process.goroutines":       float64(s.Process.Goroutines),
		"process.openFiles":        float64(s.Process.OpenFiles),
		"process.rssBytes":         float64(s.Process.RSSBytes),
		"workers.goroutines":       float64(s.Workers.Goroutines),
		"workers.store.totalBytes": float64(s.Workers.Store.TotalBytes),
	}
	store := func(prefix string, st Store) {
		out[prefix+"dbFileBytes"] = float64(st.DBFileBytes)
		out[prefix+"dbUsedBytes"] = float64(st.DBUsedBytes)
		out[prefix+"totalBytes"] = float64(st.TotalBytes)
		for k, v := range st.Dirs {
			out[prefix+"dirs."+k] = float64(v)
		}
	}
	store("workers.store.", s.Workers.Store)
	a := s.Authority
	for name, v := range map[string]*float64{"heapInuseBytes": a.HeapInuseBytes, "goroutines": a.Goroutines, "openFiles": a.OpenFiles,
		"rssBytes": a.RSSBytes, "logEvents": a.LogEvents, "groups": a.Groups, "connections": a.Connections} {
		if v != nil {
			out["authority."+name] = *v
		}
	}
	if a.Store != nil {
		store("authority.store.", *a.Store)
	}
	return out
}

// slope is the least-squares slope of ys against xs; false with fewer
// than two points or xs that do not vary.
func slope(xs, ys []float64) (float64, bool) {
	n := float64(len(xs))
	if len(xs) < 2 || len(xs) != len(ys) {
		return 0, false
	}
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx, my = mx/n, my/n
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	if sxx == 0 {
		return 0, false
	}
	return sxy / sxx, true
}

// growth computes the slopes of samples, in time order, around the
// warm-up.
func growth(samples []Sample, warmup float64) Growth {
	g := Growth{WarmupSeconds: warmup, PerHour: map[string]float64{}, PerItem: map[string]float64{}, WarmupPerHour: map[string]float64{}}
	var before, after []Sample
	for _, s := range samples {
		if s.Seconds < warmup {
			before = append(before, s)
		} else {
			after = append(after, s)
		}
	}
	if len(after) > 0 {
		before = append(before, after[0]) // the warm-up's end
	}
	g.Samples = len(after)
	fill := func(to map[string]float64, ss []Sample, x func(Sample) float64, scale float64) {
		if len(ss) < 2 {
			return
		}
		series := map[string][]float64{}
		xs := make([]float64, len(ss))
		for i, s := range ss {
			xs[i] = x(s)
			for k, v := range Readings(s) {
				series[k] = append(series[k], v)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(series)) {
			if len(series[k]) != len(xs) { // not read in every sample
				continue
			}
			if b, ok := slope(xs, series[k]); ok {
				to[k] = b * scale
			}
		}
	}
	seconds := func(s Sample) float64 { return s.Seconds }
	fill(g.PerHour, after, seconds, 3600)
	fill(g.WarmupPerHour, before, seconds, 3600)
	fill(g.PerItem, after, func(s Sample) float64 { return float64(s.Items.Completed) }, 1)
	delete(g.PerItem, "items.completed")
	return g
}
