//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// gcPod runs a sleeper on image, pulled if missing.
func gcPod(name, image string) *v1.Pod {
	p := busyboxPod(name, sleeper)
	p.Spec.Containers[0].Image = image
	p.Spec.Containers[0].ImagePullPolicy = v1.PullIfNotPresent
	return p
}

// deleteAndWait deletes a pod of the test namespace and waits until it
// and its containers are gone.
func (dn *diskNode) deleteAndWait(t *testing.T, p *v1.Pod) {
	t.Helper()
	must(t, dn.admin.CoreV1().Pods(dn.ns).Delete(dn.ctx(), p.Name, metav1.DeleteOptions{}))
	waitFor(t, 90*time.Second, p.Name+" and its containers gone", func() (bool, error) {
		_, err := dn.admin.CoreV1().Pods(dn.ns).Get(dn.ctx(), p.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err) && len(dn.containersOf(t, string(p.UID))) == 0, nil
	})
}

// Image garbage collection, for real, on a 1 GiB filesystem of the
// test's own holding containerd's root (the image filesystem). Four
// images of 64 MiB are pulled from the test registry before Skiff starts;
// imageGCHighThresholdPercent is the disk's use then, and
// imageGCLowThresholdPercent asks to free about one and a half of them.
//
// The collection at start finds every image younger than
// imageMinimumGCAge (2 minutes) and frees nothing: FreeDiskSpaceFailed.
// Pods then use three of the images and are deleted one after the other,
// a pod keeps using the fourth, and a fifth image is pulled (used by no
// container) a minute before the next collection, five minutes after the
// first. That one removes the two least recently used images, down to the
// low threshold, and keeps the last used one, the one in use, the young
// one and the sandbox image.
func TestImageGarbageCollection(t *testing.T) {
	dn := newDiskNode(t, 1024)
	r := testRegistryFor(t)
	const size = 64
	gc1, gc2, gc3 := sizedImage(t, r, "e2e-gc-1", size), sizedImage(t, r, "e2e-gc-2", size), sizedImage(t, r, "e2e-gc-3", size)
	inUse, young := sizedImage(t, r, "e2e-gc-inuse", size), sizedImage(t, r, "e2e-gc-young", 16)
	for _, ref := range []string{gc1, gc2, gc3, inUse} {
		dn.pull(t, ref)
	}
	st, err := dn.images.ImageStatus(context.Background(), &runtimeapi.ImageSpec{Image: gc1}, false)
	must(t, err)
	imageSize := int64(st.GetImage().GetSize())

	// Before the collection that counts, the young image (twice its 16
	// MiB: its blob and its unpacked layer) and Skiff's own files (pod
	// directories, logs) take about 40 MiB more; then freeing one and a
	// half images' sizes needs two of them removed.
	capacity, available := dn.fs(t)
	high := dn.usagePercent(t)
	toFree := imageSize * 3 / 2
	low := 100 - int((available-40*mib+toFree)*100/capacity) // rounding down frees up to 1% more
	if low <= 0 || low >= high {
		t.Fatalf("cannot place the low threshold: high %d%%, computed low %d%% (capacity %d MiB, available %d MiB)",
			high, low, capacity/mib, available/mib)
	}
	t.Logf("image size %d MiB; thresholds high %d%%, low %d%%; %d of %d MiB available", imageSize/mib, high, low, available/mib, capacity/mib)
	dn.appendConfig(fmt.Sprintf("imageGCHighThresholdPercent: %d\nimageGCLowThresholdPercent: %d\nimageMinimumGCAge: 2m\n", high, low))
	started := time.Now()
	dn.start()
	dn.waitNodeReady(t, v1.ConditionTrue, 90*time.Second)

	// The first collection, at start: nothing is old enough.
	waitFor(t, 60*time.Second, "FreeDiskSpaceFailed from the first collection", func() (bool, error) {
		return len(dn.nodeEvents(t, "FreeDiskSpaceFailed", started)) > 0, nil
	})
	for _, ref := range []string{gc1, gc2, gc3, inUse} {
		if !dn.hasImage(t, ref) {
			t.Fatalf("%s, younger than imageMinimumGCAge, was removed", ref)
		}
	}

	keeper := dn.createPod(t, gcPod("keeper", inUse))
	var users []*v1.Pod
	for i, ref := range []string{gc1, gc2, gc3} {
		users = append(users, dn.createPod(t, gcPod(fmt.Sprintf("user-%d", i+1), ref)))
	}
	for _, p := range append(users, keeper) {
		dn.waitPod(t, dn.ns, p.Name, 90*time.Second, "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	}
	// Image use is recorded every 30 s: each pod outlives the previous one
	// by more than that, so the images' last uses are in their order.
	for _, p := range users {
		time.Sleep(40 * time.Second)
		dn.deleteAndWait(t, p)
	}
	// Pulled late enough to be younger than imageMinimumGCAge at the
	// second collection (5 minutes after the first, found within 30 s),
	// whether the collector notices it before or at the collection.
	if wait := time.Until(started.Add(4*time.Minute + 15*time.Second)); wait > 0 {
		time.Sleep(wait)
	}
	dn.pull(t, young)
	if u := dn.usagePercent(t); u < high {
		t.Fatalf("the disk is %d%% used before the second collection, under the high threshold %d%%", u, high)
	}

	waitFor(t, time.Until(started.Add(7*time.Minute)), "the second collection to remove "+gc1, func() (bool, error) {
		return !dn.hasImage(t, gc1), nil
	})
	// The collection is one pass: what it left, it left at once.
	time.Sleep(2 * time.Second)
	if dn.hasImage(t, gc2) {
		t.Errorf("%s, the second least recently used, stayed", gc2)
	}
	for ref, why := range map[string]string{gc3: "the most recently used", inUse: "in use", young: "younger than imageMinimumGCAge",
		dn.sandbox: "the sandbox image"} {
		if !dn.hasImage(t, ref) {
			t.Errorf("%s (%s) was removed", ref, why)
		}
	}
	// containerd may free the removed images' layers a moment later.
	waitFor(t, 30*time.Second, fmt.Sprintf("the disk's use down to the low threshold %d%%", low), func() (bool, error) {
		return dn.usagePercent(t) <= low, nil
	})
	if p := dn.getPod(t, "keeper"); p.Status.Phase != v1.PodRunning {
		t.Errorf("the pod using %s is %s", inUse, p.Status.Phase)
	}
}
