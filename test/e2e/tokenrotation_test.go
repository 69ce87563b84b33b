//go:build e2e

package e2e

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// rotationTokenSeconds is the token's lifetime: the apiserver's
	// minimum for a projected serviceAccountToken, so the test is as short
	// as a real token allows.
	rotationTokenSeconds = 600
	// rotationSyncFrequency is the node's syncFrequency, set explicitly
	// (it is also the default, upstream's and Skiff's): a running pod is
	// synced, and its projected volume rewritten, at least this often.
	rotationSyncFrequency = time.Minute
	// rotationJitter is how much earlier than 80 % of its lifetime a
	// token may be refreshed (the token manager's random jitter, < 10 s).
	rotationJitter = 10 * time.Second
	// rotationSlack covers the time syncs take (the next one is timed
	// from the end of the last), whole-second token timestamps and
	// polling.
	rotationSlack = 30 * time.Second
)

// A projected serviceAccountToken is
// rotated before it expires, end to end. Skiff re-requests the token at
// 80 % of its lifetime (less a jitter) and the pod's next sync, at most
// syncFrequency later, rewrites the volume: the token file changes on the
// host and, through the ..data symlink swap, inside the running
// container, which never restarts. The new token is a different one the
// apiserver accepts for the pod's service account, bound to the pod.
// It takes about 80 % of 600 s plus up to a minute.
func TestProjectedServiceAccountTokenRotation(t *testing.T) {
	quietLong(t)
	cn := newPrivateClusterNode(t)
	f, err := os.OpenFile(cn.config, os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = fmt.Fprintf(f, "syncFrequency: %s\n", rotationSyncFrequency)
	must(t, err)
	must(t, f.Close())
	cn.start()

	// The container reads the token once per round (so the fields of a
	// line describe one read) through the volume's own layout: token ->
	// ..data/token, ..data -> ..<timestamp>.
	const dir = "/var/run/secrets/tokens"
	p := busyboxPod("rot", `cd `+dir+`
while true; do
  t=$(cat token)
  echo "data=$(readlink ..data) link=$(readlink token) sha=$(printf %s "$t" | sha256sum | cut -c1-64) len=${#t} head=$(printf %s "$t" | head -c 16)"
  sleep 2
done`)
	exp := int64(rotationTokenSeconds)
	p.Spec.Volumes = []v1.Volume{{Name: "tok", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		Sources: []v1.VolumeProjection{{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &exp}}},
	}}}}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "tok", MountPath: dir, ReadOnly: true}}
	created := cn.createPod(t, p)
	running := cn.waitPod(t, cn.ns, p.Name, 60*time.Second, "ready", isReady)
	if len(running.Status.ContainerStatuses) != 1 || running.Status.ContainerStatuses[0].ContainerID == "" {
		t.Fatalf("container statuses: %+v", running.Status.ContainerStatuses)
	}
	containerID := running.Status.ContainerStatuses[0].ContainerID

	volDir := filepath.Join(cn.root, "pods", string(created.UID), "volumes", "kubernetes.io~projected", "tok")
	logFile := filepath.Join(podLogsRoot, cn.ns+"_"+p.Name+"_"+string(created.UID), "main", "0.log")
	hostToken := func() (token, sha, data string) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(volDir, "token"))
		if err != nil {
			// The file is swapped atomically: it never goes missing.
			t.Fatalf("reading the token on the host: %v", err)
		}
		d, err := os.Readlink(filepath.Join(volDir, "..data"))
		must(t, err)
		sum := sha256.Sum256(b)
		return string(b), hex.EncodeToString(sum[:]), d
	}

	first, firstSHA, firstData := hostToken()
	claims := jwtClaims(t, first)
	issued, expires := time.Unix(claims.Iat, 0), time.Unix(claims.Exp, 0)
	if lifetime := expires.Sub(issued); lifetime != rotationTokenSeconds*time.Second {
		t.Fatalf("the first token lives %v (iat %v, exp %v), want %ds", lifetime, issued, expires, rotationTokenSeconds)
	}
	refreshAt := issued.Add(rotationTokenSeconds * time.Second * 8 / 10)
	earliest := refreshAt.Add(-rotationJitter - 2*time.Second)
	deadline := refreshAt.Add(rotationSyncFrequency + rotationSlack)
	if !deadline.Before(expires) {
		t.Fatalf("deadline %v is not before the token's expiry %v: the test would not show rotation before expiry", deadline, expires)
	}
	t.Logf("first token sha256 %s issued %s, expires %s; refresh due at %s (%v after issue), file expected to change between %v and %v after issue",
		firstSHA[:12], issued.Format(time.TimeOnly), expires.Format(time.TimeOnly), refreshAt.Format(time.TimeOnly),
		refreshAt.Sub(issued), earliest.Sub(issued), deadline.Sub(issued))

	waitFor(t, 20*time.Second, "the container logging the first token", func() (bool, error) {
		l := tokenLogLines(logFile)
		return len(l) > 0 && l[len(l)-1]["sha"] == firstSHA, nil
	})

	// Poll the host file until it changes, saying where things stand now
	// and then.
	var second, secondSHA, secondData string
	var changedAt time.Time
	lastReport := time.Now()
	for {
		tok, sha, data := hostToken()
		if sha != firstSHA {
			second, secondSHA, secondData, changedAt = tok, sha, data, time.Now()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the token file did not change within %v of the token's issue (refresh due at %v, syncFrequency %v)",
				deadline.Sub(issued), refreshAt.Sub(issued), rotationSyncFrequency)
		}
		if time.Since(lastReport) >= time.Minute {
			lastReport = time.Now()
			t.Logf("%v after issue: token unchanged (refresh due at %v, deadline %v)",
				time.Since(issued).Round(time.Second), refreshAt.Sub(issued), deadline.Sub(issued))
		}
		time.Sleep(time.Second)
	}
	t.Logf("token file changed %v after issue: sha256 %s, ..data %s -> %s",
		changedAt.Sub(issued).Round(time.Second), secondSHA[:12], firstData, secondData)
	if changedAt.Before(earliest) {
		t.Errorf("the token was replaced %v after issue, before 80 %% of its lifetime less the jitter (%v)",
			changedAt.Sub(issued), earliest.Sub(issued))
	}
	if secondData == firstData {
		t.Errorf("the token changed but ..data still points to %s: not written through the atomic layout", firstData)
	}

	// Inside the container: the new token, through a new ..data target.
	waitFor(t, 20*time.Second, "the container seeing the new token", func() (bool, error) {
		l := tokenLogLines(logFile)
		return len(l) > 0 && l[len(l)-1]["sha"] == secondSHA, nil
	})
	t.Logf("the container sees the new token %v after issue", time.Since(issued).Round(time.Second))
	// Every read in the container saw a whole token through ..data: the
	// first one, then the new one, never anything else or back again.
	// (A line reads ..data and the token one after the other, so around
	// the swap the two may come from different versions.)
	lines := tokenLogLines(logFile)
	wantLen := map[string]string{firstSHA: fmt.Sprint(len(first)), secondSHA: fmt.Sprint(len(second))}
	sawNewToken, sawNewData := false, false
	for i, l := range lines {
		if l["link"] != "..data/token" {
			t.Errorf("container read %d: token links to %q, want ..data/token", i, l["link"])
		}
		switch l["sha"] {
		case secondSHA:
			sawNewToken = true
		case firstSHA:
			if sawNewToken {
				t.Errorf("container read %d: the first token again after the new one: %v", i, l)
			}
		default:
			t.Errorf("container read %d: neither the first nor the new token: %v", i, l)
		}
		if want, ok := wantLen[l["sha"]]; ok && l["len"] != want {
			t.Errorf("container read %d: length %s, want %s: %v", i, l["len"], want, l)
		}
		switch l["data"] {
		case secondData:
			sawNewData = true
		case firstData:
			if sawNewData {
				t.Errorf("container read %d: ..data back at the first version: %v", i, l)
			}
		default:
			t.Errorf("container read %d: ..data points to %q, neither %s nor %s", i, l["data"], firstData, secondData)
		}
	}
	t.Logf("%d reads in the container, each of a whole token, old then new", len(lines))

	// The new token is a newer one, and valid for this pod's service
	// account, bound to this pod.
	newClaims := jwtClaims(t, second)
	if newClaims.Iat <= claims.Iat || newClaims.Exp-newClaims.Iat != rotationTokenSeconds {
		t.Errorf("new token iat %d exp %d, first token iat %d exp %d: want a later %ds token",
			newClaims.Iat, newClaims.Exp, claims.Iat, claims.Exp, rotationTokenSeconds)
	}
	review, err := cn.admin.AuthenticationV1().TokenReviews().Create(cn.ctx(), &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: second},
	}, metav1.CreateOptions{})
	must(t, err)
	st := review.Status
	if !st.Authenticated || st.User.Username != "system:serviceaccount:"+cn.ns+":default" {
		t.Fatalf("token review of the new token: %+v", st)
	}
	if got := st.User.Extra["authentication.kubernetes.io/pod-name"]; len(got) != 1 || got[0] != p.Name {
		t.Errorf("the new token is not bound to the pod by name: extra %v", st.User.Extra)
	}
	if got := st.User.Extra["authentication.kubernetes.io/pod-uid"]; len(got) != 1 || got[0] != string(created.UID) {
		t.Errorf("the new token is not bound to the pod by UID: extra %v", st.User.Extra)
	}

	// The pod went on undisturbed: same container, never restarted.
	now := cn.getPod(t, p.Name)
	if !isReady(now) || len(now.Status.ContainerStatuses) != 1 {
		t.Fatalf("pod after rotation: phase %s, container statuses %+v", now.Status.Phase, now.Status.ContainerStatuses)
	}
	if cs := now.Status.ContainerStatuses[0]; cs.RestartCount != 0 || cs.ContainerID != containerID || cs.State.Running == nil {
		t.Errorf("container after rotation: id %s restarts %d state %+v; want %s, 0 restarts, running", cs.ContainerID, cs.RestartCount, cs.State, containerID)
	}
	if cs := cn.containersOf(string(created.UID)); len(cs) != 1 {
		t.Errorf("the runtime has %d containers for the pod, want 1: %v", len(cs), cs)
	}
}

type tokenClaims struct {
	Iat int64 `json:"iat"`
	Exp int64 `json:"exp"`
}

// jwtClaims decodes a JWT's claims, unverified: the TokenReview verifies.
func jwtClaims(t *testing.T, token string) tokenClaims {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %d parts", len(parts))
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	must(t, err)
	var c tokenClaims
	must(t, json.Unmarshal(b, &c))
	if c.Iat == 0 || c.Exp == 0 {
		t.Fatalf("JWT claims without iat or exp: %s", b)
	}
	return c
}

// tokenLogLines parses the rotation test container's log: one map of
// key=value fields per complete line.
func tokenLogLines(path string) []map[string]string {
	b, _ := os.ReadFile(path)
	var out []map[string]string
	for _, l := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(l, " ", 4) // <time> <stream> <tag> <content>
		if len(parts) != 4 || parts[2] != "F" {
			continue
		}
		m := map[string]string{}
		for _, f := range strings.Fields(parts[3]) {
			if k, v, ok := strings.Cut(f, "="); ok {
				m[k] = v
			}
		}
		out = append(out, m)
	}
	return out
}
