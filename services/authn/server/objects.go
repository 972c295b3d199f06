package server

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"platform.io/libs/storage"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/authn/authenticator"
)

// storedObjects reads the objects token methods check through the storage API, consistently
// (a "most recent" read: a deleted account or pod is seen as gone at once).
type storedObjects struct {
	client *storage.Client
}

var _ authenticator.Objects = storedObjects{}

func (o storedObjects) get(ctx context.Context, resource, namespace, name string, into storage.Unmarshaler) error {
	resp, err := o.client.Get(ctx, &storagev1.GetRequest{Type: &storagev1.ResourceType{Resource: resource}, Namespace: namespace, Name: name})
	if storage.IsNotFound(err) {
		return fmt.Errorf("%s %q: %w", resource, name, authenticator.ErrNotFound)
	}
	if err != nil {
		return &authenticator.UnavailableError{Err: fmt.Errorf("reading %s %s/%s: %w", resource, namespace, name, err)}
	}
	if err := storage.DecodeStored(resp.GetObject().GetValue(), into); err != nil {
		return fmt.Errorf("decoding %s %s/%s: %w", resource, namespace, name, err)
	}
	return nil
}

// ServiceAccount reads a service account.
func (o storedObjects) ServiceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
	var sa corev1.ServiceAccount
	if err := o.get(ctx, "serviceaccounts", namespace, name, &sa); err != nil {
		return nil, err
	}
	return &sa, nil
}

// Secret reads a Secret.
func (o storedObjects) Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	var s corev1.Secret
	if err := o.get(ctx, "secrets", namespace, name, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Pod reads a Pod.
func (o storedObjects) Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	var p corev1.Pod
	if err := o.get(ctx, "pods", namespace, name, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Node reads a Node.
func (o storedObjects) Node(ctx context.Context, name string) (*corev1.Node, error) {
	var n corev1.Node
	if err := o.get(ctx, "nodes", "", name, &n); err != nil {
		return nil, err
	}
	return &n, nil
}
