package kubelet

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/podsource"
)

// syncMirrorPod makes the static pod's mirror pod exist and match it: a
// mirror pod being deleted or made from an older manifest is replaced.
func (k *Kubelet) syncMirrorPod(ctx context.Context, pod *v1.Pod) error {
	hash := pod.Annotations[podsource.ConfigHashAnnotation]
	if mp, ok := k.pods.mirrorOf(pod); ok {
		if mp.DeletionTimestamp == nil && mp.Annotations[podsource.ConfigMirrorAnnotation] == hash {
			return nil
		}
		if err := k.deleteMirrorPod(ctx, mp); err != nil {
			return err
		}
	}
	node := k.node.Node()
	if node == nil {
		return nil // not registered yet; a later sync creates it
	}
	mp := pod.DeepCopy()
	mp.UID, mp.ResourceVersion, mp.Status = "", "", v1.PodStatus{}
	mp.Annotations[podsource.ConfigMirrorAnnotation] = hash
	controller := true
	mp.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: &controller,
	}}
	_, err := k.client.CoreV1().Pods(mp.Namespace).Create(ctx, mp, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create mirror pod %s/%s: %w", mp.Namespace, mp.Name, err)
	}
	klog.V(2).InfoS("Created mirror pod", "pod", klog.KObj(mp))
	return nil
}

// deleteMirrorPod deletes a mirror pod at once; it runs nothing.
func (k *Kubelet) deleteMirrorPod(ctx context.Context, mp *v1.Pod) error {
	err := k.client.CoreV1().Pods(mp.Namespace).Delete(ctx, mp.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64),
		Preconditions:      &metav1.Preconditions{UID: &mp.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete mirror pod %s/%s: %w", mp.Namespace, mp.Name, err)
	}
	klog.V(2).InfoS("Deleted mirror pod", "pod", klog.KObj(mp))
	return nil
}

// Latest returns the apiserver's copy of the pod whose status describes
// pod: the mirror pod of a static pod, else the pod itself.
func (k *Kubelet) Latest(pod *v1.Pod) (*v1.Pod, bool) {
	if IsStaticPod(pod) {
		return k.pods.mirrorOf(pod)
	}
	return k.pods.get(pod.UID)
}
