package hacpo_test

import (
	"fmt"

	"github.com/hacrl/hacrl/hacpo"
)

// One HACPO step for two agents, two prompts and G = 2, as a training loop drives
// it. Log-probs are made-up numbers where an engine would run its model.
func Example() {
	s, err := hacpo.Preset("hacpo")
	if err != nil {
		panic(err)
	}
	tr, _ := hacpo.NewCapabilityTracker(2, s.Capability)

	// Rollouts: per prompt, each agent's responses (rewards from the verifier) and
	// the source's old mean token log-prob in its own tokenization.
	type rollout struct {
		src    int
		reward float64
		oldLP  float64
	}
	prompts := [][]rollout{
		{{0, 1, -1.00}, {0, 0, -1.20}, {1, 1, -0.90}, {1, 1, -0.80}},
		{{0, 0, -1.10}, {0, 0, -1.30}, {1, 1, -0.70}, {1, 0, -1.00}},
	}
	// 1. Capabilities first (the window includes this step).
	var all []hacpo.Response
	for _, p := range prompts {
		for _, r := range p {
			all = append(all, hacpo.Response{Source: r.src, Reward: r.reward})
		}
	}
	if err := tr.UpdateResponses(all); err != nil {
		panic(err)
	}
	fmt.Printf("P̂ = %.3f, ω(0,1) = %.3f, ω(1,0) = %.3f\n", tr.Capabilities(), tr.Omega(0, 1), tr.Omega(1, 0))

	learner := 0
	// 2. Advantages of every response for this learner, per prompt group.
	adv := make([][]float64, len(prompts))
	for p, rs := range prompts {
		g := make([]hacpo.Response, len(rs))
		for i, r := range rs {
			g[i] = hacpo.Response{Source: r.src, Reward: r.reward}
		}
		adv[p], _ = s.Advantages(learner, g, tr.Omega)
	}
	// 3. The plan: agent a produced 4 responses (2 prompts × 2); 4 sequences per mini-batch.
	plan, _ := s.PlanMiniBatches(learner, []int{4, 4}, 4)
	fmt.Print(plan)

	// 4. Each mini-batch: build samples, get log-probs from the engine, compute the loss.
	// By hand: learner 0's advantages are (1.1667, −0.8333 | 1.1667, 1.1667) for prompt 0
	// (baseline (1 + 0 + (1+1)/3)/4 = 5/12, std 0.5) and (−0.1667, −0.1667 | 1.8333,
	// −0.1667) for prompt 1 (baseline (1/3)/4 = 1/12, std 0.5). m = 0: four self samples
	// at ratio 1, policy = −mean A = 0; KL = (e^−0.1 + 0.1 − 1)/2 per sequence. m = 1: the
	// cross ratio e^−0.2 = 0.8187 is below L_1 = 0.825, so every cross term is the
	// constant −0.825²·ω(1,0)·A with zero gradient: −0.680625·3·mean(A = 4/4) = −2.0419.
	for _, mb := range plan.MiniBatches {
		var samples []hacpo.Sample
		var lps [][]float32
		for _, ref := range plan.Refs(mb.M) {
			p, i := ref.Index/2, ref.Source*2+ref.Index%2
			r := prompts[p][i]
			sm := hacpo.Sample{Self: ref.Source == learner, Source: ref.Source, Advantage: adv[p][i], OldMeanLogProb: r.oldLP}
			var lp []float32
			if sm.Self {
				lp = []float32{float32(r.oldLP), float32(r.oldLP)} // unchanged policy: ratio 1
				sm.RefLogProbs = []float32{float32(r.oldLP) - 0.1, float32(r.oldLP)}
				sm.OldMeanLogProb = hacpo.MeanLogProb(lp)
			} else {
				sm.Omega = tr.Omega(ref.Source, learner)
				lp = []float32{float32(r.oldLP - 0.1), float32(r.oldLP - 0.2), float32(r.oldLP - 0.3)} // s = e^−0.2
			}
			samples = append(samples, sm)
			lps = append(lps, lp)
		}
		loss, grad, err := s.MiniBatchLoss(mb.M, samples, lps)
		if err != nil {
			panic(err)
		}
		fmt.Printf("m=%d loss %.5f (policy %.5f, KL %.6f), cross ratio %.4f, lower-clip %.2f, grad[0][0] %.5f\n",
			mb.M, loss.Total, loss.Policy, loss.KL, loss.Stats.CrossRatioMean(), loss.Stats.CrossLowerFrac(), grad[0][0])
	}
	// Output:
	// P̂ = [0.250 0.750], ω(0,1) = 0.333, ω(1,0) = 3.000
	// learner 0: 8 sequences, 2 updates of up to 4 sequences
	//   m=0: 4 sequences (self 4, cross 0): agent0[0:4]
	//   m=1: 4 sequences (self 0, cross 4, cross lower bound 0.825): agent1[0:4]
	// m=0 loss 0.00000 (policy -0.00000, KL 0.002419), cross ratio 0.0000, lower-clip 0.00, grad[0][0] -0.14582
	// m=1 loss -2.04187 (policy -2.04187, KL 0.000000), cross ratio 0.8187, lower-clip 1.00, grad[0][0] 0.00000
}
