package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

type fakeStats struct {
	err  error
	only []bool // the onlyCPUAndMemory of each call
}

func (f *fakeStats) Summary(_ context.Context, only bool) (*statsapi.Summary, error) {
	f.only = append(f.only, only)
	return &statsapi.Summary{Node: statsapi.NodeStats{NodeName: "n1"}}, f.err
}

func (f *fakeStats) ResourceHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("resource")) })
}

func (f *fakeStats) CadvisorHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("cadvisor")) })
}

func TestStatsRoutes(t *testing.T) {
	for _, tc := range []struct {
		url      string
		err      error
		wantCode int
		wantOnly []bool
	}{
		{"/stats/summary", nil, http.StatusOK, []bool{false}},
		{"/stats/summary?only_cpu_and_memory=true", nil, http.StatusOK, []bool{true}},
		{"/stats/summary?only_cpu_and_memory=false", nil, http.StatusOK, []bool{false}},
		{"/stats/summary?only_cpu_and_memory=yes-please", nil, http.StatusBadRequest, nil},
		{"/stats/summary", errors.New("runtime down"), http.StatusInternalServerError, []bool{false}},
		{"/metrics/resource", nil, http.StatusOK, nil},
		{"/metrics/cadvisor", nil, http.StatusOK, nil},
	} {
		t.Run(tc.url, func(t *testing.T) {
			sp := &fakeStats{err: tc.err}
			mux := http.NewServeMux()
			StatsRoutes(sp)(mux)
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest("GET", tc.url, nil))
			if rec.Code != tc.wantCode {
				t.Fatalf("code %d, want %d: %s", rec.Code, tc.wantCode, rec.Body)
			}
			if len(sp.only) != len(tc.wantOnly) || (len(sp.only) == 1 && sp.only[0] != tc.wantOnly[0]) {
				t.Errorf("summary calls %v, want %v", sp.only, tc.wantOnly)
			}
			if path := strings.TrimPrefix(tc.url, "/metrics/"); path != tc.url {
				if rec.Body.String() != path {
					t.Errorf("body %q, want %q's", rec.Body, path)
				}
			} else if tc.wantCode == http.StatusOK {
				var s statsapi.Summary
				if err := json.NewDecoder(rec.Body).Decode(&s); err != nil || s.Node.NodeName != "n1" {
					t.Errorf("body: %v %+v", err, s)
				}
			}
		})
	}
}
