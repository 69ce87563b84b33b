package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// The only group/version/kind a config file may declare.
var wantGVK = kubeletconfigv1beta1.SchemeGroupVersion.WithKind("KubeletConfiguration")

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := kubeletconfigv1beta1.AddToScheme(s); err != nil {
		panic(err) // only fails on programmer error
	}
	return s
}()

// Two strict serializers: YAML input is checked for duplicate keys by the
// YAML layer, JSON input by the JSON layer, so each gets its own to avoid
// reporting one duplicate twice.
var (
	yamlSerializer = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme,
		kjson.SerializerOptions{Yaml: true, Strict: true})
	jsonSerializer = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme,
		kjson.SerializerOptions{Yaml: false, Strict: true})
)

// Load reads a KubeletConfiguration from a YAML or JSON file. The file must
// declare apiVersion kubelet.config.k8s.io/v1beta1 and kind
// KubeletConfiguration, and is decoded strictly: unknown fields, duplicate
// fields and values of the wrong type are errors, each naming the file and
// the field. As upstream, relative paths in the file (staticPodPath,
// tlsCertFile, resolvConf, ...) are taken relative to the file's directory.
// Defaults are not applied.
func Load(path string) (*kubeletconfigv1beta1.KubeletConfiguration, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	c, errs := decode(data)
	if len(errs) > 0 {
		wrapped := make([]error, len(errs))
		for i, e := range errs {
			wrapped[i] = fmt.Errorf("config file %s: %w", path, e)
		}
		return nil, errors.Join(wrapped...)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	resolveRelativePaths(c, filepath.Dir(abs))
	return c, nil
}

// Decode is Load for bytes already in memory; paths are left as written.
func Decode(data []byte) (*kubeletconfigv1beta1.KubeletConfiguration, error) {
	c, errs := decode(data)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

func decode(data []byte) (*kubeletconfigv1beta1.KubeletConfiguration, []error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, []error{errors.New("file is empty")}
	}
	isJSON := utilyaml.IsJSONBuffer(data)
	ser := yamlSerializer
	if isJSON {
		ser = jsonSerializer
	}

	// Check apiVersion and kind ourselves first: the serializer's own
	// messages for these ("no kind ... is registered") are hard to act on.
	asJSON, err := utilyaml.ToJSON(data)
	if err != nil {
		return nil, []error{fmt.Errorf("parse: %w", err)}
	}
	gvk, err := kjson.DefaultMetaFactory.Interpret(asJSON)
	if err != nil {
		return nil, []error{fmt.Errorf("parse: %w", err)}
	}
	if err := checkGVK(*gvk); err != nil {
		return nil, []error{err}
	}

	c := &kubeletconfigv1beta1.KubeletConfiguration{}
	_, _, err = ser.Decode(data, nil, c)
	if err == nil {
		return c, nil
	}
	if strictErr, ok := runtime.AsStrictDecodingError(err); ok {
		var errs []error
		for _, e := range strictErr.Errors() {
			errs = append(errs, tidyStrictError(e)...)
		}
		return nil, errs
	}
	return nil, perFieldErrors(asJSON, err)
}

func checkGVK(gvk schema.GroupVersionKind) error {
	var errs []error
	apiVersion := gvk.GroupVersion().String()
	switch {
	case gvk.Version == "":
		errs = append(errs, fmt.Errorf("apiVersion is missing, want %q", wantGVK.GroupVersion().String()))
	case gvk.GroupVersion() != wantGVK.GroupVersion():
		errs = append(errs, fmt.Errorf("apiVersion %q is not supported, want %q", apiVersion, wantGVK.GroupVersion().String()))
	}
	switch gvk.Kind {
	case "":
		errs = append(errs, fmt.Errorf("kind is missing, want %q", wantGVK.Kind))
	case wantGVK.Kind:
	default:
		errs = append(errs, fmt.Errorf("kind %q is not supported, want %q", gvk.Kind, wantGVK.Kind))
	}
	return errors.Join(errs...)
}

// The YAML layer reports duplicate keys as `line N: key "x" already set in
// map`; say it the way the JSON layer does.
var yamlDuplicate = regexp.MustCompile(`line (\d+): key "([^"]*)" already set in map`)

func tidyStrictError(err error) []error {
	matches := yamlDuplicate.FindAllStringSubmatch(err.Error(), -1)
	if len(matches) == 0 {
		return []error{err}
	}
	errs := make([]error, len(matches))
	for i, m := range matches {
		errs[i] = fmt.Errorf("duplicate field %q (line %s)", m[2], m[1])
	}
	return errs
}

// The JSON decoder's type errors name the Go struct before the JSON path.
var jsonTypeError = regexp.MustCompile(`^json: cannot unmarshal (.+) into Go struct field [A-Za-z0-9_]+\.(\S+) of type (.+)$`)

// perFieldErrors explains a fatal (non-strict) decode failure, which the
// serializer reports alone and, for custom unmarshalers such as durations,
// without a field name. Decoding each top-level field on its own finds every
// field that fails and every strict problem besides.
func perFieldErrors(asJSON []byte, fatal error) []error {
	var fields map[string]json.RawMessage
	if json.Unmarshal(asJSON, &fields) != nil {
		return []error{describeFatal("", fatal)}
	}
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if k == "apiVersion" || k == "kind" {
			continue
		}
		one, err := json.Marshal(map[string]json.RawMessage{
			"apiVersion": fields["apiVersion"],
			"kind":       fields["kind"],
			k:            fields[k],
		})
		if err != nil {
			continue
		}
		_, _, err = jsonSerializer.Decode(one, nil, &kubeletconfigv1beta1.KubeletConfiguration{})
		if strictErr, ok := runtime.AsStrictDecodingError(err); ok {
			errs = append(errs, strictErr.Errors()...)
		} else if err != nil {
			errs = append(errs, describeFatal(k, err))
		}
	}
	if len(errs) == 0 {
		return []error{describeFatal("", fatal)}
	}
	return errs
}

// describeFatal names the field of a decode error: type errors carry the
// full path; otherwise the top-level field is the best we know.
func describeFatal(topLevel string, err error) error {
	if m := jsonTypeError.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Errorf("field %q: cannot unmarshal %s into %s", m[2], m[1], m[3])
	}
	if topLevel != "" {
		return fmt.Errorf("field %q: %w", topLevel, err)
	}
	return err
}
