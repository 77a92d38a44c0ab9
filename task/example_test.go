package task_test

import (
	"fmt"

	"github.com/hacrl/hacrl/task"
)

func Example() {
	arith, err := task.New("arith", task.Options{Seed: 1, Digits: 2, Operators: "+"})
	if err != nil {
		panic(err)
	}
	p := arith.Problem(task.Train, 0)
	fmt.Println(arith.Reward(p, p.Solution))
	fmt.Println(arith.Reward(p, "#### 0"))
	fmt.Println(arith.Reward(task.Problem{Question: "47+38", Answer: "85"}, "7+8=15;4+3+1=8;=85\n#### 85"))
	// Output:
	// 1
	// 0
	// 1
}

func ExampleEvalExpression() {
	v, err := task.EvalExpression("(25-5)*8/4", []int{4, 5, 8, 25}, false)
	fmt.Println(v.RatString(), err)
	_, err = task.EvalExpression("25-5-5", []int{4, 5, 8, 25}, false)
	fmt.Println(err)
	// Output:
	// 40 <nil>
	// number not available: 5 is not given or already used
}
