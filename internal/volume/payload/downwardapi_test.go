package payload

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/internal/volume/atomic"
)

func testPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      "web",
			Namespace: "shop",
			UID:       "1234-abcd",
			Labels:    map[string]string{"app": "web", "tier": "front"},
			Annotations: map[string]string{
				"quote":           `say "hi"`,
				"multi":           "line1\nline2",
				"example.com/Key": "ünïcode\ttab",
			},
		},
		Spec: v1.PodSpec{
			InitContainers: []v1.Container{{
				Name: "init",
				Resources: v1.ResourceRequirements{
					Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")},
				},
			}},
			Containers: []v1.Container{
				{
					Name: "app",
					Resources: v1.ResourceRequirements{
						Requests: v1.ResourceList{
							v1.ResourceCPU:              resource.MustParse("250m"),
							v1.ResourceMemory:           resource.MustParse("1.5Mi"),
							v1.ResourceEphemeralStorage: resource.MustParse("1Gi"),
							"hugepages-2Mi":             resource.MustParse("4Mi"),
						},
						Limits: v1.ResourceList{
							v1.ResourceCPU:    resource.MustParse("1500m"),
							v1.ResourceMemory: resource.MustParse("64Mi"),
							"hugepages-2Mi":   resource.MustParse("4Mi"),
						},
					},
				},
				{Name: "nolimits"},
				{
					Name: "zerolimit",
					Resources: v1.ResourceRequirements{
						Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("0")},
					},
				},
			},
		},
	}
}

var testAllocatable = v1.ResourceList{
	v1.ResourceCPU:              resource.MustParse("4"),
	v1.ResourceMemory:           resource.MustParse("8Gi"),
	v1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
}

func fieldItem(path, fieldPath string) v1.DownwardAPIVolumeFile {
	return v1.DownwardAPIVolumeFile{Path: path, FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: fieldPath}}
}

func resourceItem(path, container, res, divisor string) v1.DownwardAPIVolumeFile {
	sel := &v1.ResourceFieldSelector{ContainerName: container, Resource: res}
	if divisor != "" {
		sel.Divisor = resource.MustParse(divisor)
	}
	return v1.DownwardAPIVolumeFile{Path: path, ResourceFieldRef: sel}
}

func TestDownwardAPIFields(t *testing.T) {
	cases := []struct {
		name    string
		item    v1.DownwardAPIVolumeFile
		want    string
		wantErr string
	}{
		{name: "name", item: fieldItem("f", "metadata.name"), want: "web"},
		{name: "namespace", item: fieldItem("f", "metadata.namespace"), want: "shop"},
		{name: "uid", item: fieldItem("f", "metadata.uid"), want: "1234-abcd"},
		{name: "labels", item: fieldItem("f", "metadata.labels"), want: "app=\"web\"\ntier=\"front\""},
		{
			name: "annotations are sorted and Go-quoted",
			item: fieldItem("f", "metadata.annotations"),
			want: "example.com/Key=\"ünïcode\\ttab\"\nmulti=\"line1\\nline2\"\nquote=\"say \\\"hi\\\"\"",
		},
		{name: "one label", item: fieldItem("f", "metadata.labels['tier']"), want: "front"},
		{name: "absent label", item: fieldItem("f", "metadata.labels['nope']"), want: ""},
		{name: "one annotation, upper case key", item: fieldItem("f", "metadata.annotations['example.com/Key']"), want: "ünïcode\ttab"},
		{name: "invalid label key", item: fieldItem("f", "metadata.labels['a b']"), wantErr: "invalid key subscript in metadata.labels['a b']"},
		{name: "subscript elsewhere", item: fieldItem("f", "metadata.name['x']"), wantErr: `fieldPath "metadata.name['x']" does not support subscript`},
		{name: "unsupported", item: fieldItem("f", "spec.nodeName"), wantErr: "unsupported fieldPath: spec.nodeName"},
		{name: "no reference", item: v1.DownwardAPIVolumeFile{Path: "f"}, want: ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{tc.item}}
			got, err := DownwardAPI(src, testPod(), testAllocatable)
			if checkErr(t, err, tc.wantErr) {
				checkFiles(t, got, map[string]atomic.File{"f": f(tc.want, 0o644)})
			}
		})
	}
}

func TestDownwardAPIResources(t *testing.T) {
	cases := []struct {
		name    string
		item    v1.DownwardAPIVolumeFile
		want    string
		wantErr string
	}{
		{name: "cpu limit rounds up to cores", item: resourceItem("f", "app", "limits.cpu", ""), want: "2"},
		{name: "cpu limit in millicores", item: resourceItem("f", "app", "limits.cpu", "1m"), want: "1500"},
		{name: "cpu request rounds up", item: resourceItem("f", "app", "requests.cpu", "1"), want: "1"},
		{name: "cpu request in millicores", item: resourceItem("f", "app", "requests.cpu", "1m"), want: "250"},
		{name: "memory limit in bytes", item: resourceItem("f", "app", "limits.memory", ""), want: "67108864"},
		{name: "memory limit in Mi", item: resourceItem("f", "app", "limits.memory", "1Mi"), want: "64"},
		{name: "memory request rounds up", item: resourceItem("f", "app", "requests.memory", "1Mi"), want: "2"},
		{name: "memory request in k", item: resourceItem("f", "app", "requests.memory", "1k"), want: "1573"},
		{name: "ephemeral request", item: resourceItem("f", "app", "requests.ephemeral-storage", "1Mi"), want: "1024"},
		{name: "unset ephemeral limit is allocatable", item: resourceItem("f", "app", "limits.ephemeral-storage", "1Gi"), want: "100"},
		{name: "unset cpu limit is allocatable", item: resourceItem("f", "nolimits", "limits.cpu", ""), want: "4"},
		{name: "unset memory limit is allocatable", item: resourceItem("f", "nolimits", "limits.memory", "1Gi"), want: "8"},
		{name: "zero limit is allocatable", item: resourceItem("f", "zerolimit", "limits.memory", "1Gi"), want: "8"},
		{name: "unset request is zero", item: resourceItem("f", "nolimits", "requests.memory", ""), want: "0"},
		{name: "init container", item: resourceItem("f", "init", "requests.cpu", "1m"), want: "100"},
		{name: "hugepages request", item: resourceItem("f", "app", "requests.hugepages-2Mi", "1Mi"), want: "4"},
		{name: "hugepages limit", item: resourceItem("f", "app", "limits.hugepages-2Mi", ""), want: "4194304"},
		{name: "unknown container", item: resourceItem("f", "ghost", "limits.cpu", ""), wantErr: "container ghost not found"},
		{name: "unsupported resource", item: resourceItem("f", "app", "limits.gpu", ""), wantErr: "unsupported container resource : limits.gpu"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{tc.item}}
			got, err := DownwardAPI(src, testPod(), testAllocatable)
			if checkErr(t, err, tc.wantErr) {
				checkFiles(t, got, map[string]atomic.File{"f": f(tc.want, 0o644)})
			}
		})
	}
}

func TestDownwardAPIModesAndPaths(t *testing.T) {
	src := &v1.DownwardAPIVolumeSource{
		DefaultMode: i32(0o400),
		Items: []v1.DownwardAPIVolumeFile{
			fieldItem("name", "metadata.name"),
			{Path: "sub/./labels", Mode: i32(0o640), FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}},
		},
	}
	got, err := DownwardAPI(src, testPod(), nil)
	checkErr(t, err, "")
	checkFiles(t, got, map[string]atomic.File{"name": f("web", 0o400), "sub/labels": f("web", 0o640)})
}

func TestDownwardAPINoAllocatable(t *testing.T) {
	// Without the node's allocatable an unset limit reads as zero.
	src := &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{resourceItem("f", "nolimits", "limits.cpu", "")}}
	got, err := DownwardAPI(src, testPod(), nil)
	checkErr(t, err, "")
	checkFiles(t, got, map[string]atomic.File{"f": f("0", 0o644)})
}

func TestDownwardAPIAggregatesErrors(t *testing.T) {
	src := &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
		fieldItem("a", "spec.nodeName"),
		fieldItem("ok", "metadata.name"),
		resourceItem("b", "ghost", "limits.cpu", ""),
	}}
	_, err := DownwardAPI(src, testPod(), nil)
	checkErr(t, err, "[unsupported fieldPath: spec.nodeName, container ghost not found]")
}

func TestFormatMap(t *testing.T) {
	cases := []struct {
		in   map[string]string
		want string
	}{
		{nil, ""},
		{map[string]string{"k": ""}, `k=""`},
		{map[string]string{"b": "2", "a": "1"}, "a=\"1\"\nb=\"2\""},
		{map[string]string{"k": "tab\there\x00nul\\back"}, `k="tab\there\x00nul\\back"`},
	}
	for _, tc := range cases {
		if got := FormatMap(tc.in); got != tc.want {
			t.Errorf("FormatMap(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
