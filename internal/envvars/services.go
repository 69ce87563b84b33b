package envvars

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/internal/kube"
)

// masterServices get variables in every pod, from the default namespace,
// even with enableServiceLinks false: in-cluster clients read them.
var masterServices = map[string]bool{"kubernetes": true}

// ServiceLister lists the Services the kubelet knows; a client-go lister fits.
type ServiceLister interface {
	List(selector labels.Selector) ([]*v1.Service, error)
}

// ServiceWatch keeps a cache of the cluster's Services with a client-go
// informer. Headless Services are not watched: they have no variables.
type ServiceWatch struct {
	informer cache.SharedIndexInformer
	lister   corelisters.ServiceLister
}

// NewServiceWatch prepares the informer; Run starts it.
func NewServiceWatch(client corev1client.CoreV1Interface) *ServiceWatch {
	inf := kube.NewInformer(client.Services(metav1.NamespaceAll), &v1.Service{}, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermNotEqualSelector("spec.clusterIP", v1.ClusterIPNone).String()
	})
	return &ServiceWatch{informer: inf, lister: corelisters.NewServiceLister(inf.GetIndexer())}
}

// Run runs the informer until ctx ends, and waits for its goroutines.
func (w *ServiceWatch) Run(ctx context.Context) {
	wait := kube.RunInformer(ctx, w.informer)
	<-ctx.Done()
	wait()
}

// Lister lists the cached Services.
func (w *ServiceWatch) Lister() ServiceLister { return w.lister }

// HasSynced reports whether the Services were listed at least once.
func (w *ServiceWatch) HasSynced() bool { return w.informer.HasSynced() }

// serviceEnv returns the variables of the Services a pod of namespace ns
// sees: the master services always, the namespace's own when links are on.
func serviceEnv(lister ServiceLister, ns string, links bool) (map[string]string, error) {
	m := map[string]string{}
	if lister == nil { // standalone: no Services
		return m, nil
	}
	all, err := lister.List(labels.Everything())
	if err != nil {
		return m, fmt.Errorf("failed to list services when setting up env vars")
	}
	byName := map[string]*v1.Service{}
	for _, s := range all {
		if !hasClusterIP(s) {
			continue
		}
		switch {
		case s.Namespace == metav1.NamespaceDefault && masterServices[s.Name]:
			if _, ok := byName[s.Name]; !ok {
				byName[s.Name] = s
			}
		case s.Namespace == ns && links:
			byName[s.Name] = s
		}
	}
	services := make([]*v1.Service, 0, len(byName))
	for _, s := range byName {
		services = append(services, s)
	}
	for _, e := range FromServices(services) {
		m[e.Name] = e.Value
	}
	return m, nil
}

func hasClusterIP(s *v1.Service) bool {
	return s.Spec.ClusterIP != "" && s.Spec.ClusterIP != v1.ClusterIPNone
}

// FromServices returns the variables that tell a container where the given
// Services are, as upstream names them: <NAME>_SERVICE_HOST,
// <NAME>_SERVICE_PORT (the first port), <NAME>_SERVICE_PORT_<PORTNAME> per
// named port, and Docker link variables (<NAME>_PORT, and per port
// <NAME>_PORT_<port>_<PROTO> with _PROTO, _PORT and _ADDR).
func FromServices(services []*v1.Service) []v1.EnvVar {
	var out []v1.EnvVar
	for _, s := range services {
		if !hasClusterIP(s) || len(s.Spec.Ports) == 0 {
			continue
		}
		prefix := varName(s.Name)
		port := prefix + "_SERVICE_PORT"
		out = append(out,
			v1.EnvVar{Name: prefix + "_SERVICE_HOST", Value: s.Spec.ClusterIP},
			v1.EnvVar{Name: port, Value: strconv.Itoa(int(s.Spec.Ports[0].Port))})
		for _, sp := range s.Spec.Ports {
			if sp.Name != "" {
				out = append(out, v1.EnvVar{Name: port + "_" + varName(sp.Name), Value: strconv.Itoa(int(sp.Port))})
			}
		}
		out = append(out, linkVars(s, prefix)...)
	}
	return out
}

// varName upper-cases a DNS label and turns its dashes into underscores.
func varName(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }

func linkVars(s *v1.Service, prefix string) []v1.EnvVar {
	var out []v1.EnvVar
	for i, sp := range s.Spec.Ports {
		proto := string(v1.ProtocolTCP)
		if sp.Protocol != "" {
			proto = string(sp.Protocol)
		}
		lower := strings.ToLower(proto)
		num := strconv.Itoa(int(sp.Port))
		url := lower + "://" + net.JoinHostPort(s.Spec.ClusterIP, num)
		if i == 0 { // Docker names the first port specially
			out = append(out, v1.EnvVar{Name: prefix + "_PORT", Value: url})
		}
		p := prefix + "_PORT_" + num + "_" + strings.ToUpper(proto)
		out = append(out,
			v1.EnvVar{Name: p, Value: url},
			v1.EnvVar{Name: p + "_PROTO", Value: lower},
			v1.EnvVar{Name: p + "_PORT", Value: num},
			v1.EnvVar{Name: p + "_ADDR", Value: s.Spec.ClusterIP})
	}
	return out
}
