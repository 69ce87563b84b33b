package kubeletconfig

import (
	"testing"

	"sigs.k8s.io/yaml"
)

// The YAML decodes to the fields given.
func TestYAMLDecodes(t *testing.T) {
	c := Comparison{Endpoint: "unix:///run/x.sock", CgroupRoot: "/rt1", Port: 10260, HealthzPort: 10261,
		ClientCAFile: "/ca.crt", Taints: []string{"a/b", "c"}}
	var got struct {
		ContainerRuntimeEndpoint string `json:"containerRuntimeEndpoint"`
		CgroupRoot               string `json:"cgroupRoot"`
		Port                     int    `json:"port"`
		HealthzPort              int    `json:"healthzPort"`
		Authentication           struct {
			X509 struct {
				ClientCAFile string `json:"clientCAFile"`
			} `json:"x509"`
		} `json:"authentication"`
		RegisterWithTaints []struct{ Key, Effect string } `json:"registerWithTaints"`
		EvictionHard       map[string]string              `json:"evictionHard"`
	}
	if err := yaml.Unmarshal([]byte(c.YAML()), &got); err != nil {
		t.Fatal(err)
	}
	if got.ContainerRuntimeEndpoint != c.Endpoint || got.CgroupRoot != c.CgroupRoot || got.Port != c.Port ||
		got.HealthzPort != c.HealthzPort || got.Authentication.X509.ClientCAFile != c.ClientCAFile {
		t.Errorf("decoded %+v from\n%s", got, c.YAML())
	}
	if len(got.RegisterWithTaints) != 2 || got.RegisterWithTaints[1].Key != "c" || got.RegisterWithTaints[1].Effect != "NoSchedule" {
		t.Errorf("taints %+v", got.RegisterWithTaints)
	}
	if got.EvictionHard["nodefs.available"] != "1%" {
		t.Errorf("evictionHard %v: the %%%% of the format went through", got.EvictionHard)
	}
}
