package train

import (
	"math"

	"github.com/hacrl/hacrl/config"
)

// learningRate is the scheduled learning rate at a 0-based step of total:
// linear warm-up over WarmupSteps, then constant, linear decay or cosine decay
// to MinLRRatio·lr at the last step.
func learningRate(o config.Optimizer, step, total int) float64 {
	lr := o.LR
	if o.WarmupSteps > 0 && step < o.WarmupSteps {
		return lr * float64(step+1) / float64(o.WarmupSteps)
	}
	if o.Schedule == "constant" || total <= o.WarmupSteps+1 {
		return lr
	}
	p := float64(step-o.WarmupSteps) / float64(total-o.WarmupSteps-1)
	p = math.Min(math.Max(p, 0), 1)
	floor := lr * o.MinLRRatio
	switch o.Schedule {
	case "linear":
		return floor + (lr-floor)*(1-p)
	case "cosine":
		return floor + (lr-floor)*0.5*(1+math.Cos(math.Pi*p))
	}
	return lr
}
