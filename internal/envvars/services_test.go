package envvars

import (
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func svc(ns, name, ip string, ports ...v1.ServicePort) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1.ServiceSpec{ClusterIP: ip, Ports: ports},
	}
}

func TestFromServices(t *testing.T) {
	got := FromServices([]*v1.Service{
		svc("ns", "my-svc", "10.0.0.5",
			v1.ServicePort{Name: "http", Port: 80, Protocol: v1.ProtocolTCP},
			v1.ServicePort{Name: "dns-udp", Port: 53, Protocol: v1.ProtocolUDP}),
		svc("ns", "v6", "fd00::1", v1.ServicePort{Port: 8080}), // no name, no protocol: TCP
		svc("ns", "headless", v1.ClusterIPNone, v1.ServicePort{Port: 1}),
		svc("ns", "external", "", v1.ServicePort{Port: 2}),
	})
	want := []v1.EnvVar{
		{Name: "MY_SVC_SERVICE_HOST", Value: "10.0.0.5"},
		{Name: "MY_SVC_SERVICE_PORT", Value: "80"},
		{Name: "MY_SVC_SERVICE_PORT_HTTP", Value: "80"},
		{Name: "MY_SVC_SERVICE_PORT_DNS_UDP", Value: "53"},
		{Name: "MY_SVC_PORT", Value: "tcp://10.0.0.5:80"},
		{Name: "MY_SVC_PORT_80_TCP", Value: "tcp://10.0.0.5:80"},
		{Name: "MY_SVC_PORT_80_TCP_PROTO", Value: "tcp"},
		{Name: "MY_SVC_PORT_80_TCP_PORT", Value: "80"},
		{Name: "MY_SVC_PORT_80_TCP_ADDR", Value: "10.0.0.5"},
		{Name: "MY_SVC_PORT_53_UDP", Value: "udp://10.0.0.5:53"},
		{Name: "MY_SVC_PORT_53_UDP_PROTO", Value: "udp"},
		{Name: "MY_SVC_PORT_53_UDP_PORT", Value: "53"},
		{Name: "MY_SVC_PORT_53_UDP_ADDR", Value: "10.0.0.5"},
		{Name: "V6_SERVICE_HOST", Value: "fd00::1"},
		{Name: "V6_SERVICE_PORT", Value: "8080"},
		{Name: "V6_PORT", Value: "tcp://[fd00::1]:8080"},
		{Name: "V6_PORT_8080_TCP", Value: "tcp://[fd00::1]:8080"},
		{Name: "V6_PORT_8080_TCP_PROTO", Value: "tcp"},
		{Name: "V6_PORT_8080_TCP_PORT", Value: "8080"},
		{Name: "V6_PORT_8080_TCP_ADDR", Value: "fd00::1"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("FromServices =\n%v\nwant\n%v", got, want)
	}
}

type fakeLister []*v1.Service

func (f fakeLister) List(labels.Selector) ([]*v1.Service, error) { return f, nil }

func TestServiceEnvSelection(t *testing.T) {
	lister := fakeLister{
		svc("default", "kubernetes", "10.0.0.1", v1.ServicePort{Name: "https", Port: 443}),
		svc("default", "other", "10.0.0.2", v1.ServicePort{Port: 80}),
		svc("app", "web", "10.0.0.3", v1.ServicePort{Port: 8080}),
		svc("app", "kubernetes", "10.0.0.4", v1.ServicePort{Port: 1}), // wins in its namespace when linked, as upstream
		svc("elsewhere", "db", "10.0.0.5", v1.ServicePort{Port: 5432}),
	}
	cases := []struct {
		ns      string
		links   bool
		want    []string // *_SERVICE_HOST values present
		notWant []string
	}{
		{"app", true, []string{"KUBERNETES=10.0.0.4", "WEB=10.0.0.3"}, []string{"OTHER", "DB"}},
		{"app", false, []string{"KUBERNETES=10.0.0.1"}, []string{"WEB", "OTHER", "DB"}},
		{"default", true, []string{"KUBERNETES=10.0.0.1", "OTHER=10.0.0.2"}, []string{"WEB", "DB"}},
		{"default", false, []string{"KUBERNETES=10.0.0.1"}, []string{"OTHER"}},
	}
	for _, c := range cases {
		m, err := serviceEnv(lister, c.ns, c.links)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range c.want {
			name, ip, _ := strings.Cut(w, "=")
			if got := m[name+"_SERVICE_HOST"]; got != ip {
				t.Errorf("ns %s links %v: %s_SERVICE_HOST = %q, want %q", c.ns, c.links, name, got, ip)
			}
		}
		for _, n := range c.notWant {
			if _, ok := m[n+"_SERVICE_HOST"]; ok {
				t.Errorf("ns %s links %v: %s_SERVICE_HOST should not be set", c.ns, c.links, n)
			}
		}
	}
	if m, err := serviceEnv(nil, "app", true); err != nil || len(m) != 0 {
		t.Errorf("standalone serviceEnv = %v, %v; want none", m, err)
	}
}
