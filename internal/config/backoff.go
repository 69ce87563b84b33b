package config

import (
	"time"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Container restart (crash loop) back-off, as upstream 1.34: 10 s doubling
// to 300 s; 1 s to 60 s with ReduceDefaultCrashLoopBackOffDecay; and with
// KubeletCrashLoopBackOffMax the cap is crashLoopBackOff.maxContainerRestartPeriod,
// which also caps the first delay.
const (
	crashBackOffInitial        = 10 * time.Second
	reducedCrashBackOffInitial = time.Second
	reducedCrashBackOffMax     = 60 * time.Second
	gateReduceCrashBackOff     = "ReduceDefaultCrashLoopBackOffDecay"
)

// CrashLoopBackOff returns the first and the longest container restart
// delay a validated configuration asks for.
func CrashLoopBackOff(c *kubeletconfigv1beta1.KubeletConfiguration) (initial, maximum time.Duration) {
	initial, maximum = crashBackOffInitial, DefaultMaxContainerRestartPeriod
	if gateEnabled(c, gateReduceCrashBackOff) {
		initial, maximum = reducedCrashBackOffInitial, reducedCrashBackOffMax
	}
	if gateEnabled(c, gateCrashLoopBackOffMax) && c.CrashLoopBackOff.MaxContainerRestartPeriod != nil {
		maximum = c.CrashLoopBackOff.MaxContainerRestartPeriod.Duration
		if maximum < initial {
			initial = maximum
		}
	}
	return initial, maximum
}
