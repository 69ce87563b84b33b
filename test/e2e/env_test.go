//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The environment a container gets, printed by the
// container itself (`env`, no shell in between), against the API
// documentation: values with $(VAR) expansion, valueFrom of every kind,
// envFrom with a prefix and a key that is no C identifier, optional
// references that are missing, service variables, and command/args
// expansion.
func TestContainerEnv(t *testing.T) {
	cn := sharedNode(t)
	ctx := context.Background()
	_, err := cn.admin.CoreV1().ConfigMaps(cn.ns).Create(ctx, &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "env-cm"},
		Data:       map[string]string{"color": "blue", "size": "L", "1-bad.key": "x"},
	}, metav1.CreateOptions{})
	must(t, err)
	_, err = cn.admin.CoreV1().Secrets(cn.ns).Create(ctx, &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "env-sec"},
		Data:       map[string][]byte{"password": []byte("s3cret"), "token": []byte("t0k")},
	}, metav1.CreateOptions{})
	must(t, err)
	svc, err := cn.admin.CoreV1().Services(cn.ns).Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "my-svc"},
		Spec: v1.ServiceSpec{Ports: []v1.ServicePort{
			{Name: "http", Port: 80, Protocol: v1.ProtocolTCP},
			{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP},
		}},
	}, metav1.CreateOptions{})
	must(t, err)
	kube, err := cn.admin.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	must(t, err)

	f := func(path string) *v1.EnvVarSource {
		return &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: path}}
	}
	r := func(container, res, divisor string) *v1.EnvVarSource {
		return &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: container, Resource: res, Divisor: resource.MustParse(divisor)}}
	}
	yes := true
	cmRef := func(name, key string, optional bool) *v1.EnvVarSource {
		return &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: key, Optional: &optional}}
	}
	secRef := func(name, key string, optional bool) *v1.EnvVarSource {
		return &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: key, Optional: &optional}}
	}
	p := busyboxPod("env", "")
	p.Labels["tier"] = "front"
	p.Annotations = map[string]string{"note": "hello"}
	p.Spec.RestartPolicy = v1.RestartPolicyNever
	main := &p.Spec.Containers[0]
	main.Command = []string{"env"}
	main.Resources = v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("32Mi")},
		Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")},
	}
	main.EnvFrom = []v1.EnvFromSource{
		{Prefix: "CM_", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "env-cm"}}},
		{Prefix: "S_", SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "env-sec"}}},
		{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "absent"}, Optional: &yes}},
	}
	main.Env = []v1.EnvVar{
		{Name: "PLAIN", Value: "plain"},
		{Name: "COLOR", ValueFrom: cmRef("env-cm", "color", false)},
		{Name: "EXPANDED", Value: "$(PLAIN)-and-$(COLOR)"},
		{Name: "ESCAPED", Value: "$$(PLAIN)"},
		{Name: "UNRESOLVED", Value: "$(NOPE)"},
		{Name: "FORWARD", Value: "$(LATER)"},
		{Name: "LATER", Value: "later"},
		{Name: "FROM_ENVFROM", Value: "$(CM_size)"},
		{Name: "SVC_URL", Value: "http://$(MY_SVC_SERVICE_HOST):$(MY_SVC_SERVICE_PORT)"},
		{Name: "MY_SVC_SERVICE_PORT_DNS", Value: "mine"}, // wins over the service's
		{Name: "POD_NAME", ValueFrom: f("metadata.name")},
		{Name: "POD_NAMESPACE", ValueFrom: f("metadata.namespace")},
		{Name: "POD_UID", ValueFrom: f("metadata.uid")},
		{Name: "LABEL", ValueFrom: f("metadata.labels['tier']")},
		{Name: "ANNOTATION", ValueFrom: f("metadata.annotations['note']")},
		{Name: "NODE_NAME", ValueFrom: f("spec.nodeName")},
		{Name: "SA", ValueFrom: f("spec.serviceAccountName")},
		{Name: "HOST_IP", ValueFrom: f("status.hostIP")},
		{Name: "HOST_IPS", ValueFrom: f("status.hostIPs")},
		{Name: "POD_IP", ValueFrom: f("status.podIP")},
		{Name: "POD_IPS", ValueFrom: f("status.podIPs")},
		{Name: "CPU_REQ_M", ValueFrom: r("", "requests.cpu", "1m")},
		{Name: "CPU_REQ", ValueFrom: r("", "requests.cpu", "1")},
		{Name: "MEM_REQ_KI", ValueFrom: r("main", "requests.memory", "1Ki")},
		{Name: "MEM_LIM_MI", ValueFrom: r("", "limits.memory", "1Mi")},
		{Name: "CPU_LIM", ValueFrom: r("", "limits.cpu", "1")}, // unset: the node's allocatable
		{Name: "PASSWORD", ValueFrom: secRef("env-sec", "password", false)},
		{Name: "OPT_KEY", ValueFrom: cmRef("env-cm", "missing", true)},
		{Name: "OPT_CM", ValueFrom: cmRef("absent", "k", true)},
		{Name: "OPT_SECRET", ValueFrom: secRef("absent", "k", true)},
	}
	// Command and args expand the final environment; no shell in between.
	p.Spec.Containers = append(p.Spec.Containers, v1.Container{
		Name: "args", Image: busybox, ImagePullPolicy: v1.PullNever,
		Command: []string{"echo", "CMD=$(PLAIN)"},
		Args:    []string{"$(PLAIN)-x", "$$(PLAIN)", "$(NOPE)", "$(MY_SVC_SERVICE_PORT_HTTP)"},
		Env:     []v1.EnvVar{{Name: "PLAIN", Value: "plain"}},
	})
	created := cn.createPod(t, p)
	done := cn.waitPod(t, cn.ns, "env", 60*time.Second, "Succeeded", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded })

	env := containerLogEnv(t, filepath.Join(podLogsRoot, cn.ns+"_env_"+string(created.UID), "main", "0.log"))
	node := cn.getNode(t)
	cpuAlloc := node.Status.Allocatable[v1.ResourceCPU]
	var hostIPs, podIPs []string
	for _, ip := range done.Status.HostIPs {
		hostIPs = append(hostIPs, ip.IP)
	}
	for _, ip := range done.Status.PodIPs {
		podIPs = append(podIPs, ip.IP)
	}
	ip := svc.Spec.ClusterIP
	want := map[string]string{
		"PLAIN": "plain", "COLOR": "blue", "EXPANDED": "plain-and-blue", "ESCAPED": "$(PLAIN)",
		"UNRESOLVED": "$(NOPE)", "FORWARD": "$(LATER)", "LATER": "later", "FROM_ENVFROM": "L",
		"SVC_URL":  "http://" + ip + ":80",
		"POD_NAME": "env", "POD_NAMESPACE": cn.ns, "POD_UID": string(created.UID), "LABEL": "front",
		"ANNOTATION": "hello", "NODE_NAME": nodeName, "SA": "default",
		"HOST_IP": done.Status.HostIP, "HOST_IPS": strings.Join(hostIPs, ","),
		"POD_IP": done.Status.PodIP, "POD_IPS": strings.Join(podIPs, ","),
		"CPU_REQ_M": "250", "CPU_REQ": "1", "MEM_REQ_KI": "32768", "MEM_LIM_MI": "64",
		"CPU_LIM":  fmt.Sprint(int64(math.Ceil(float64(cpuAlloc.MilliValue()) / 1000))),
		"PASSWORD": "s3cret",
		// envFrom: prefixed, every key as it is (v1.34 no longer skips
		// keys that are no C identifiers), the optional missing one ignored.
		"CM_color": "blue", "CM_size": "L", "CM_1-bad.key": "x", "S_password": "s3cret", "S_token": "t0k",
		// Services of the namespace, and the master service.
		"MY_SVC_SERVICE_HOST": ip, "MY_SVC_SERVICE_PORT": "80", "MY_SVC_SERVICE_PORT_HTTP": "80",
		"MY_SVC_SERVICE_PORT_DNS": "mine",
		"MY_SVC_PORT":             "tcp://" + net.JoinHostPort(ip, "80"),
		"MY_SVC_PORT_80_TCP":      "tcp://" + net.JoinHostPort(ip, "80"), "MY_SVC_PORT_80_TCP_PROTO": "tcp",
		"MY_SVC_PORT_80_TCP_PORT": "80", "MY_SVC_PORT_80_TCP_ADDR": ip,
		"MY_SVC_PORT_53_UDP": "udp://" + net.JoinHostPort(ip, "53"), "MY_SVC_PORT_53_UDP_PROTO": "udp",
		"MY_SVC_PORT_53_UDP_PORT": "53", "MY_SVC_PORT_53_UDP_ADDR": ip,
		"KUBERNETES_SERVICE_HOST": kube.Spec.ClusterIP, "KUBERNETES_SERVICE_PORT": "443",
		"KUBERNETES_SERVICE_PORT_HTTPS": "443",
	}
	for k, w := range want {
		if got, ok := env[k]; !ok || got != w {
			t.Errorf("%s = %q (set: %v), want %q", k, got, ok, w)
		}
	}
	for _, k := range []string{"OPT_KEY", "OPT_CM", "OPT_SECRET"} {
		if v, ok := env[k]; ok {
			t.Errorf("%s = %q: an optional reference that is missing must leave the variable unset", k, v)
		}
	}
	args := containerLogLines(t, filepath.Join(podLogsRoot, cn.ns+"_env_"+string(created.UID), "args", "0.log"))
	if w := "CMD=plain plain-x $(PLAIN) $(NOPE) 80"; len(args) != 1 || args[0] != w {
		t.Errorf("args container printed %q, want %q", args, w)
	}

	// enableServiceLinks false: the namespace's services go, the master
	// service stays.
	nolinks := busyboxPod("nolinks", "")
	nolinks.Spec.RestartPolicy = v1.RestartPolicyNever
	nolinks.Spec.Containers[0].Command = []string{"env"}
	no := false
	nolinks.Spec.EnableServiceLinks = &no
	created = cn.createPod(t, nolinks)
	cn.waitPod(t, cn.ns, "nolinks", 60*time.Second, "Succeeded", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded })
	env = containerLogEnv(t, filepath.Join(podLogsRoot, cn.ns+"_nolinks_"+string(created.UID), "main", "0.log"))
	if _, ok := env["MY_SVC_SERVICE_HOST"]; ok {
		t.Error("enableServiceLinks false: MY_SVC_SERVICE_HOST must not be set")
	}
	if env["KUBERNETES_SERVICE_HOST"] != kube.Spec.ClusterIP {
		t.Errorf("enableServiceLinks false: KUBERNETES_SERVICE_HOST = %q, want %q", env["KUBERNETES_SERVICE_HOST"], kube.Spec.ClusterIP)
	}
}

// containerLogLines returns the content of a CRI log file's lines
// ("<time> <stream> <tag> <content>").
func containerLogLines(t *testing.T, path string) []string {
	t.Helper()
	var b []byte
	waitFor(t, 10*time.Second, "log "+path, func() (bool, error) {
		var err error
		b, err = os.ReadFile(path)
		return err == nil && len(b) > 0, nil
	})
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(l, " ", 4)
		if len(parts) == 4 {
			out = append(out, parts[3])
		}
	}
	return out
}

// containerLogEnv parses `env` output from a container's log.
func containerLogEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, l := range containerLogLines(t, path) {
		if k, v, ok := strings.Cut(l, "="); ok {
			env[k] = v
		}
	}
	return env
}
