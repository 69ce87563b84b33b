package file

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// decodeManifest strictly decodes a manifest holding exactly one v1 Pod, in
// YAML or JSON. Unknown and duplicate fields are errors, as with
// "kubectl create --validate=strict": a typo in a static pod manifest would
// otherwise be silently dropped.
//
// It also returns the manifest as canonical JSON (sorted keys, no comments
// or formatting) for hashing.
func decodeManifest(data []byte) (pod *v1.Pod, canonical []byte, err error) {
	doc, err := singleDocument(data)
	if err != nil {
		return nil, nil, err
	}
	// As upstream, YAML is turned into JSON first (JSON is YAML).
	// YAMLToJSONStrict rejects duplicate keys.
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("invalid YAML: %w", err)
	}
	var obj map[string]any
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber() // keep numbers exactly as written
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, nil, errors.New("manifest is not a YAML or JSON object")
	}
	if err := checkKind(obj); err != nil {
		return nil, nil, err
	}
	pod = &v1.Pod{}
	// sigs.k8s.io/json is what the apiserver decodes with: case-sensitive,
	// and strict errors name the full field path.
	strictErrs, err := sjson.UnmarshalStrict(js, pod, sjson.DisallowUnknownFields)
	if err != nil {
		return nil, nil, fmt.Errorf("decoding pod: %w", err)
	}
	if len(strictErrs) > 0 {
		return nil, nil, fmt.Errorf("strict decoding error: %w", errors.Join(strictErrs...))
	}
	if canonical, err = json.Marshal(obj); err != nil { // map keys come out sorted
		return nil, nil, fmt.Errorf("encoding manifest: %w", err)
	}
	return pod, canonical, nil
}

func checkKind(obj map[string]any) error {
	var tm metav1.TypeMeta
	tm.Kind, _ = obj["kind"].(string)
	tm.APIVersion, _ = obj["apiVersion"].(string)
	switch {
	case tm.Kind == "":
		return errors.New("manifest has no kind: a static pod manifest must be a v1 Pod")
	case tm.Kind == "List" || tm.Kind == "PodList":
		return fmt.Errorf("kind %s is not supported: put each pod in its own manifest file", tm.Kind)
	case tm.Kind != "Pod":
		return fmt.Errorf("kind %s is not supported: a static pod manifest must be a v1 Pod", tm.Kind)
	case tm.APIVersion != "v1":
		return fmt.Errorf("apiVersion %q is not supported: a static pod manifest must be a v1 Pod", tm.APIVersion)
	}
	return nil
}

// singleDocument returns the only non-empty YAML document of data. Several
// documents are an error rather than silently ignoring all but the first.
func singleDocument(data []byte) ([]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var found []byte
	n := 0
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading YAML: %w", err)
		}
		if isEmptyDocument(doc) {
			continue
		}
		n++
		found = doc
	}
	switch {
	case n == 0:
		return nil, errors.New("manifest is empty")
	case n > 1:
		return nil, fmt.Errorf("manifest holds %d YAML documents: put each pod in its own manifest file", n)
	}
	return found, nil
}

// isEmptyDocument reports a document of only blank lines and comments.
func isEmptyDocument(doc []byte) bool {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' && !bytes.Equal(line, []byte("---")) {
			return false
		}
	}
	return true
}
