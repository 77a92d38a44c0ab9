package hacpo

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func newTracker(t *testing.T, agents int, cs CapabilitySettings) *CapabilityTracker {
	t.Helper()
	tr, err := NewCapabilityTracker(agents, cs)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func update(t *testing.T, tr *CapabilityTracker, rewards ...[]float64) {
	t.Helper()
	if err := tr.Update(rewards); err != nil {
		t.Fatal(err)
	}
}

func TestCapabilityNoHistory(t *testing.T) {
	tr := newTracker(t, 3, DefaultCapability())
	for a := 0; a < 3; a++ {
		if c := tr.Capability(a); c != 1 {
			t.Errorf("capability(%d) = %v with no history, want 1", a, c)
		}
		for b := 0; b < 3; b++ {
			if w := tr.Omega(a, b); w != 1 {
				t.Errorf("ω(%d,%d) = %v with no history, want 1", a, b, w)
			}
		}
	}
	if !math.IsNaN(tr.Omega(0, 3)) || !math.IsNaN(tr.Capability(-1)) {
		t.Error("out-of-range index should give NaN")
	}
}

// Eq 9 by hand: window K = 3, metric = fraction of rewards > 0, floor 1e-8.
func TestCapabilityWindowGolden(t *testing.T) {
	cs := DefaultCapability()
	cs.Window = 3
	tr := newTracker(t, 2, cs)
	// step 1: agent 0: 1 of 4 positive = 0.25; agent 1: 3 of 4 = 0.75.
	update(t, tr, []float64{1, 0, 0, 0}, []float64{1, 1, 1, 0})
	if got, want := tr.Capability(0), 0.25; got != want {
		t.Fatalf("P̂0 after 1 step = %v, want %v", got, want)
	}
	// ω(0,1) = 0.25/0.75 = 1/3; ω(1,0) = 3.
	if got, want := tr.Omega(0, 1), 0.25/0.75; got != want {
		t.Errorf("ω(0,1) = %v, want %v", got, want)
	}
	if got, want := tr.Omega(1, 0), 0.75/0.25; got != want {
		t.Errorf("ω(1,0) = %v, want %v", got, want)
	}
	// step 2: agent 0: 2 of 4 = 0.5 → window (0.25, 0.5), mean 0.375.
	// agent 1: 0 of 4 = 0 → floored to 1e-8 → window (0.75, 1e-8), mean (0.75+1e-8)/2.
	update(t, tr, []float64{1, 1, 0, 0}, []float64{0, 0, 0, 0})
	if got, want := tr.Capability(0), (0.25+0.5)/2; got != want {
		t.Errorf("P̂0 = %v, want %v", got, want)
	}
	if got, want := tr.Capability(1), (0.75+1e-8)/2; got != want {
		t.Errorf("P̂1 = %v, want %v", got, want)
	}
	// steps 3, 4: the window keeps the last 3 values.
	update(t, tr, []float64{1, 1, 1, 1}, []float64{0, 0, 0, 0}) // agent 0: 1.0
	update(t, tr, []float64{0, 0, 0, 0}, []float64{0, 0, 0, 0}) // agent 0: 0 → 1e-8
	// agent 0 window (0.5, 1.0, 1e-8); agent 1 window (1e-8, 1e-8, 1e-8).
	if got, want := tr.Capability(0), (0.5+1.0+1e-8)/3; !near(got, want, 1e-15) {
		t.Errorf("P̂0 = %v, want %v", got, want)
	}
	if got, want := tr.Capability(1), (1e-8+1e-8+1e-8)/3; !near(got, want, 1e-15) {
		t.Errorf("P̂1 = %v, want %v", got, want)
	}
	// ω(0,1) = 0.5/1e-8 = 5e7 → clamped to 10; ω(1,0) → 0.1.
	if got := tr.Omega(0, 1); got != 10 {
		t.Errorf("ω(0,1) = %v, want the clamp 10", got)
	}
	if got := tr.Omega(1, 0); got != 0.1 {
		t.Errorf("ω(1,0) = %v, want the clamp 0.1", got)
	}
	st := tr.State()
	if !reflect.DeepEqual(st.History[0], []float64{0.5, 1.0, 1e-8}) || st.Steps != 4 {
		t.Errorf("state = %+v", st)
	}
}

func TestCapabilityMetrics(t *testing.T) {
	rs := []float64{0.5, 1.0, 0.0}
	// fraction > 0: 2/3; mean: (0.5+1+0)/3 = 0.5.
	if v, _ := (CapabilitySettings{Metric: PositiveRate, Floor: 1e-8}).StepValue(rs); v != 2.0/3.0 {
		t.Errorf("positive rate = %v, want 2/3", v)
	}
	if v, _ := (CapabilitySettings{Metric: MeanReward, Floor: 1e-8}).StepValue(rs); v != 0.5 {
		t.Errorf("mean reward = %v, want 0.5", v)
	}
	if v, _ := (CapabilitySettings{Metric: MeanReward, Floor: 1e-8}).StepValue([]float64{-1, 0}); v != 1e-8 {
		t.Errorf("negative mean reward should be floored, got %v", v)
	}
	if _, err := (CapabilitySettings{Metric: PositiveRate, Floor: 1e-8}).StepValue(nil); err == nil {
		t.Error("no rewards: want an error")
	}
}

func TestCapabilityWarmup(t *testing.T) {
	cs := DefaultCapability()
	cs.WarmupSteps = 2
	tr := newTracker(t, 2, cs)
	for step := 1; step <= 3; step++ {
		update(t, tr, []float64{1, 0}, []float64{1, 1}) // P̂ = 0.5 and 1
		want := 1.0
		if step > 2 {
			want = 0.5 / 1.0
		}
		if got := tr.Omega(0, 1); got != want {
			t.Errorf("step %d: ω(0,1) = %v, want %v", step, got, want)
		}
	}
}

func TestCapabilityUpdateErrorsLeaveStateUnchanged(t *testing.T) {
	tr := newTracker(t, 2, DefaultCapability())
	update(t, tr, []float64{1}, []float64{0})
	before := tr.State()
	for _, bad := range [][][]float64{
		{{1}},                // one agent missing
		{{1}, {}},            // agent 1 has no response
		{{1}, {math.NaN()}},  // NaN
		{{1}, {math.Inf(1)}}, // Inf
		{{1}, {0}, {1}},      // too many agents
	} {
		if err := tr.Update(bad); err == nil {
			t.Errorf("Update(%v): want an error", bad)
		}
	}
	if !reflect.DeepEqual(before, tr.State()) {
		t.Error("a failed Update changed the state")
	}
	if err := tr.UpdateResponses([]Response{{Source: 2, Reward: 1}}); err == nil || !strings.Contains(err.Error(), "source 2") {
		t.Errorf("UpdateResponses with a bad source: %v", err)
	}
}

// The state is a plain struct that round-trips through encoding/json bit-exactly,
// and a restored tracker continues exactly like the original.
func TestCapabilityStateJSONRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cs := DefaultCapability()
	cs.Window = 4
	cs.Metric = MeanReward
	cs.WarmupSteps = 1
	tr := newTracker(t, 3, cs)
	step := func(tr *CapabilityTracker, rng *rand.Rand) {
		rs := make([][]float64, 3)
		for a := range rs {
			for i := 0; i < 7; i++ {
				rs[a] = append(rs[a], rng.Float64()*math.Pi/3) // awkward decimal expansions
			}
		}
		update(t, tr, rs...)
	}
	for i := 0; i < 6; i++ {
		step(tr, rng)
	}
	// Put some extreme values in too.
	st := tr.State()
	st.History[0][0] = math.Nextafter(1e-8, 1)
	st.History[1][1] = 0.1 + 0.2
	st.History[2][2] = math.Nextafter(1, 0)
	tr, err := RestoreCapabilityTracker(st)
	if err != nil {
		t.Fatal(err)
	}

	data, err := json.Marshal(tr.State())
	if err != nil {
		t.Fatal(err)
	}
	var back CapabilityState
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	orig := tr.State()
	if !reflect.DeepEqual(orig, back) {
		t.Fatalf("JSON round trip changed the state:\n%+v\n%+v", orig, back)
	}
	for a := range orig.History {
		for i := range orig.History[a] {
			if math.Float64bits(orig.History[a][i]) != math.Float64bits(back.History[a][i]) {
				t.Fatalf("bits differ at agent %d value %d", a, i)
			}
		}
	}
	tr2, err := RestoreCapabilityTracker(back)
	if err != nil {
		t.Fatal(err)
	}
	rngA, rngB := rand.New(rand.NewPCG(7, 7)), rand.New(rand.NewPCG(7, 7))
	for i := 0; i < 5; i++ {
		step(tr, rngA)
		step(tr2, rngB)
		for a := 0; a < 3; a++ {
			for b := 0; b < 3; b++ {
				if math.Float64bits(tr.Omega(a, b)) != math.Float64bits(tr2.Omega(a, b)) {
					t.Fatalf("restored tracker diverged at ω(%d,%d)", a, b)
				}
			}
		}
	}
	// The tracker's state is a copy: editing it does not change the tracker.
	s := tr.State()
	s.History[0][0] = 123
	if tr.State().History[0][0] == 123 {
		t.Error("State() aliases the tracker's history")
	}
}

func TestCapabilityRestoreRejectsBadState(t *testing.T) {
	good := CapabilityState{Settings: DefaultCapability(), Agents: 2, Steps: 1, History: [][]float64{{0.5}, {0.25}}}
	if _, err := RestoreCapabilityTracker(good); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(*CapabilityState){
		"agents":       func(s *CapabilityState) { s.Agents = 3 },
		"window":       func(s *CapabilityState) { s.Settings.Window = 0 },
		"too long":     func(s *CapabilityState) { s.Steps = 9; s.History[0] = []float64{1, 1, 1, 1, 1, 1} },
		"below floor":  func(s *CapabilityState) { s.History[1][0] = 0 },
		"nan":          func(s *CapabilityState) { s.History[1][0] = math.NaN() },
		"steps":        func(s *CapabilityState) { s.Steps = 0 },
		"metric":       func(s *CapabilityState) { s.Settings.Metric = "accuracy" },
		"ratio bounds": func(s *CapabilityState) { s.Settings.RatioMin = 20 },
	}
	for name, f := range cases {
		st := good.clone()
		f(&st)
		if _, err := RestoreCapabilityTracker(st); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}
