package kubelet

import (
	"context"
	"time"

	"github.com/skiff-sh/skiff/internal/cri"
)

// featuresWait bounds how long the features line waits for the PLEG to
// learn whether the runtime streams events (a first healthy stream or an
// Unimplemented answer; both take a second or so).
const featuresWait = 30 * time.Second

// logRuntimeFeatures logs once, shortly after start, what Skiff uses of
// the runtime's optional CRI calls and what it falls back to.
func (k *Kubelet) logRuntimeFeatures(ctx context.Context) {
	wctx, cancel := context.WithTimeout(ctx, featuresWait)
	offered, _ := k.pleg.EventsOffered(wctx)
	cancel()
	if ctx.Err() != nil {
		return
	}
	f := cri.DetectFeatures(ctx, k.cri.Runtime, k.cri.Images)
	f.Events = offered
	f.Log(k.cri.RuntimeName + " " + k.cri.RuntimeVersion)
}
