package dataset

import "github.com/hacrl/hacrl/verify"

// verifyChecker is the default Checker: package verify's math checker.
var verifyChecker = Checker{Reward: verify.Reward, Extract: verify.Extract, Equal: verify.Equal}
