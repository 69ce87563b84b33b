package logs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
)

// Source finds containers' logs for Handler; the kubelet implements it.
type Source interface {
	// ContainerLog returns the log of a container of a pod the node runs:
	// of its current instance, or with previous of the one before. An
	// error wrapping ErrNotFound means no such pod or container; any
	// other says why the container has no log to read.
	ContainerLog(ctx context.Context, namespace, pod, container string, previous bool) (Log, error)
}

// Log is one container instance's log file.
type Log struct {
	Path string
	// Running reports whether the instance still runs; a follower stops
	// once it does not and the file is drained. nil: it has stopped.
	Running Running
}

// ErrNotFound is what a Source's errors for an unknown pod or container wrap.
var ErrNotFound = errors.New("not found")

// NotFound returns an error with that message that wraps ErrNotFound.
func NotFound(format string, args ...any) error {
	return notFound(fmt.Sprintf(format, args...))
}

type notFound string

func (e notFound) Error() string        { return string(e) }
func (e notFound) Is(target error) bool { return target == ErrNotFound }

// Prefix is the kubelet API route Handler serves.
const Prefix = "/containerLogs/"

// Handler serves GET /containerLogs/{namespace}/{pod}/{container} with
// the query parameters of v1.PodLogOptions (follow, previous, tailLines,
// limitBytes, sinceSeconds, sinceTime, timestamps, stream; and the legacy
// tail, "all" meaning no limit), as upstream's kubelet: 400 for a query
// that does not parse, 422 for options that do not validate, 404 for an
// unknown pod or container, 400 when the container has no log to read
// (waiting to start, no previous instance). It serves the path with or
// without the prefix, so it can be mounted at Prefix directly or under
// http.StripPrefix.
func Handler(src Source) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		ns, pod, ctr, status, err := parsePath(r.URL.Path)
		if err != nil {
			http.Error(w, err.Error(), status)
			return
		}
		opts, status, err := parseQuery(r.URL.Query())
		if err != nil {
			http.Error(w, err.Error(), status)
			return
		}
		ctx := r.Context()
		log, err := src.ContainerLog(ctx, ns, pod, ctr, opts.Previous)
		if errors.Is(err, ErrNotFound) {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if r.Method == http.MethodHead {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			return
		}
		out := &responseWriter{w: w}
		bw := bufio.NewWriterSize(out, 32<<10)
		var stdout, stderr io.Writer = bw, bw
		switch stream(opts) {
		case v1.LogStreamStdout:
			stderr = nil
		case v1.LogStreamStderr:
			stdout = nil
		}
		err = ReadLogs(ctx, log.Path, NewOptions(opts, time.Now()), log.Running, stdout, stderr)
		if ferr := bw.Flush(); err == nil {
			err = ferr
		}
		switch {
		case err == nil:
			if !out.started {
				out.start() // an empty log is an empty 200
			}
		case ctx.Err() != nil:
			// The client went away.
		case !out.started:
			http.Error(w, err.Error(), http.StatusBadRequest)
		default:
			klog.V(2).InfoS("Container log stream ended with an error", "pod", klog.KRef(ns, pod), "container", ctr, "err", err)
		}
	})
}

// responseWriter writes the 200 header on the first write and flushes
// each write through: the buffer in front of it decides when to write.
type responseWriter struct {
	w       http.ResponseWriter
	started bool
}

func (rw *responseWriter) start() {
	rw.started = true
	rw.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	rw.w.WriteHeader(http.StatusOK)
}

func (rw *responseWriter) Write(p []byte) (int, error) {
	if !rw.started {
		rw.start()
	}
	n, err := rw.w.Write(p)
	if err != nil {
		return n, err
	}
	if err := http.NewResponseController(rw.w).Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return n, err
	}
	return n, nil
}

// parsePath splits {namespace}/{pod}/{container} off the path and checks
// each is a valid name, so that nothing like ".." reaches a Source.
func parsePath(p string) (ns, pod, ctr string, status int, err error) {
	p = strings.TrimPrefix(p, strings.TrimSuffix(Prefix, "/"))
	parts := strings.Split(strings.Trim(p, "/"), "/")
	if len(parts) != 3 {
		return "", "", "", http.StatusNotFound, errors.New("not found: want /containerLogs/{namespace}/{pod}/{container}")
	}
	ns, pod, ctr = parts[0], parts[1], parts[2]
	for _, c := range []struct {
		what, value string
		check       func(string) []string
	}{
		{"namespace", ns, validation.IsDNS1123Label},
		{"pod name", pod, validation.IsDNS1123Subdomain},
		{"container name", ctr, validation.IsDNS1123Label},
	} {
		if c.value == "" {
			return "", "", "", http.StatusBadRequest, fmt.Errorf("missing %s", c.what)
		}
		if errs := c.check(c.value); len(errs) > 0 {
			return "", "", "", http.StatusBadRequest, fmt.Errorf("invalid %s %q: %s", c.what, c.value, strings.Join(errs, "; "))
		}
	}
	return ns, pod, ctr, 0, nil
}

// parseQuery decodes v1.PodLogOptions from the query as the API's
// parameter codec does (a boolean is false only absent, "0" or
// "false"), then validates them as the apiserver does.
func parseQuery(q url.Values) (*v1.PodLogOptions, int, error) {
	if tail := q.Get("tail"); tail != "" { // upstream's legacy name
		q["tailLines"] = []string{tail}
		if tail == "all" {
			delete(q, "tailLines")
		}
	}
	o := &v1.PodLogOptions{}
	for _, b := range []struct {
		name string
		out  *bool
	}{{"follow", &o.Follow}, {"previous", &o.Previous}, {"timestamps", &o.Timestamps}, {"insecureSkipTLSVerifyBackend", &o.InsecureSkipTLSVerifyBackend}} {
		if v, ok := q[b.name]; ok {
			if err := runtime.Convert_Slice_string_To_bool(&v, b.out, nil); err != nil {
				return nil, http.StatusBadRequest, fmt.Errorf("unable to decode query: %s: %w", b.name, err)
			}
		}
	}
	for _, n := range []struct {
		name string
		out  **int64
	}{{"tailLines", &o.TailLines}, {"limitBytes", &o.LimitBytes}, {"sinceSeconds", &o.SinceSeconds}} {
		if v, ok := q[n.name]; ok {
			if err := runtime.Convert_Slice_string_To_Pointer_int64(&v, n.out, nil); err != nil {
				return nil, http.StatusBadRequest, fmt.Errorf("unable to decode query: %s: %w", n.name, err)
			}
		}
	}
	if v, ok := q["sinceTime"]; ok {
		if err := metav1.Convert_Slice_string_To_Pointer_v1_Time(&v, &o.SinceTime, nil); err != nil {
			return nil, http.StatusBadRequest, fmt.Errorf("unable to decode query: sinceTime: %w", err)
		}
	}
	if v, ok := q["stream"]; ok && len(v) > 0 && v[0] != "" {
		o.Stream = &v[0]
	}
	if err := validate(o); err != nil {
		return nil, http.StatusUnprocessableEntity, err
	}
	return o, 0, nil
}

// validate checks the options as the apiserver's ValidatePodLogOptions.
func validate(o *v1.PodLogOptions) error {
	var errs []string
	if o.TailLines != nil && *o.TailLines < 0 {
		errs = append(errs, "tailLines: must be greater than or equal to 0")
	}
	if o.LimitBytes != nil && *o.LimitBytes < 1 {
		errs = append(errs, "limitBytes: must be greater than 0")
	}
	switch {
	case o.SinceSeconds != nil && o.SinceTime != nil:
		errs = append(errs, "at most one of `sinceTime` or `sinceSeconds` may be specified")
	case o.SinceSeconds != nil && *o.SinceSeconds < 1:
		errs = append(errs, "sinceSeconds: must be greater than 0")
	}
	if o.Stream != nil {
		switch *o.Stream {
		case v1.LogStreamStdout, v1.LogStreamStderr, v1.LogStreamAll:
		default:
			errs = append(errs, fmt.Sprintf("stream: Unsupported value: %q: supported values: %q, %q, %q", *o.Stream, v1.LogStreamAll, v1.LogStreamStderr, v1.LogStreamStdout))
		}
		if *o.Stream != v1.LogStreamAll && o.TailLines != nil {
			errs = append(errs, "`tailLines` and specific `stream` are mutually exclusive for now")
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid request: %s", strings.Join(errs, "; "))
	}
	return nil
}

func stream(o *v1.PodLogOptions) string {
	if o.Stream == nil {
		return v1.LogStreamAll
	}
	return *o.Stream
}
