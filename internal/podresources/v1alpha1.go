package podresources

import (
	"context"

	podresourcesv1alpha1 "k8s.io/kubelet/pkg/apis/podresources/v1alpha1"
)

// v1alpha1 is the older API upstream still serves on the same socket:
// List only, of every pod Skiff knows and their app containers, devices
// without topology.
type v1alpha1 struct {
	podresourcesv1alpha1.UnimplementedPodResourcesListerServer
	s *Server
}

func (a v1alpha1) List(ctx context.Context, _ *podresourcesv1alpha1.ListPodResourcesRequest) (*podresourcesv1alpha1.ListPodResourcesResponse, error) {
	out := &podresourcesv1alpha1.ListPodResourcesResponse{}
	for _, p := range a.s.pods.AllPods() {
		pr := &podresourcesv1alpha1.PodResources{Name: p.Name, Namespace: p.Namespace}
		for _, c := range p.Spec.Containers {
			cr := &podresourcesv1alpha1.ContainerResources{Name: c.Name}
			for _, d := range a.s.devices.ContainerDevices(p.UID, c.Name) {
				cr.Devices = append(cr.Devices, &podresourcesv1alpha1.ContainerDevices{ResourceName: d.ResourceName, DeviceIds: d.DeviceIds})
			}
			pr.Containers = append(pr.Containers, cr)
		}
		out.PodResources = append(out.PodResources, pr)
	}
	return out, nil
}
