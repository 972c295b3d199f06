package e2e

import (
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"platform.io/test/stack"
)

// TestGarbageCollection checks the garbage collector and the deletion options end to end: kubectl
// delete with every --cascade, a chain of three levels deleted in the foreground (the owner goes
// last), a custom resource owning built-in objects, and a dependent whose owner was re-created
// with the same name.
func TestGarbageCollection(t *testing.T) {
	garbageCollection(t, useShared(t))
}

func TestGarbageCollectionAllInOne(t *testing.T) {
	t.Parallel()
	garbageCollection(t, startStack(t, stack.Options{Mode: stack.AllInOne}))
}

const gcBound = time.Minute

var gcOwnersGVR = schema.GroupVersionResource{Group: "gc.example.com", Version: "v1", Resource: "gcowners"}

func owned(name string, owners ...metav1.Object) *unstructured.Unstructured {
	cm := configMap(name, nil, nil)
	var refs []metav1.OwnerReference
	block := true
	for _, o := range owners {
		u := o.(*unstructured.Unstructured)
		refs = append(refs, metav1.OwnerReference{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Name: u.GetName(), UID: u.GetUID(), BlockOwnerDeletion: &block})
	}
	cm.SetOwnerReferences(refs)
	return cm
}

func garbageCollection(t *testing.T, s *stack.Stack) {
	ctx := ctxFor(t, 4*time.Minute)
	dyn := dynamicClient(t, s)
	ns := createNamespace(t, dyn, "e2e-gc-")
	cms := dyn.Resource(configMapsGVR).Namespace(ns)
	create := func(obj *unstructured.Unstructured) *unstructured.Unstructured {
		t.Helper()
		got, err := cms.Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating %s: %v", obj.GetName(), err)
		}
		return got
	}
	exists := func(rc dynamic.ResourceInterface, name string) bool {
		_, err := rc.Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("get %s: %v", name, err)
		}
		return err == nil
	}
	waitGone := func(rc dynamic.ResourceInterface, name string) {
		t.Helper()
		stack.Eventually(t, gcBound, name+" collected", func() error {
			if exists(rc, name) {
				return fmt.Errorf("%s still exists", name)
			}
			return nil
		})
	}

	t.Run("KubectlCascade", func(t *testing.T) {
		k := newKubectl(t, s, ns)
		for _, cascade := range []string{"background", "foreground", "orphan"} {
			owner := create(configMap("owner-"+cascade, nil, nil))
			create(owned("dep-"+cascade, owner))
			k.ok("", "delete", "configmap", "owner-"+cascade, "--cascade="+cascade)
			if exists(cms, "owner-"+cascade) && cascade != "background" {
				// kubectl waits for the object to be gone, foreground and orphan included.
				t.Errorf("--cascade=%s: kubectl returned before the owner was gone", cascade)
			}
			if cascade == "orphan" {
				dep, err := cms.Get(ctx, "dep-"+cascade, metav1.GetOptions{})
				if err != nil {
					t.Fatalf("--cascade=orphan deleted the dependent: %v", err)
				}
				if refs := dep.GetOwnerReferences(); len(refs) != 0 {
					t.Errorf("--cascade=orphan left the owner reference: %+v", refs)
				}
				continue
			}
			waitGone(cms, "dep-"+cascade)
		}
	})

	t.Run("ForegroundChainOfThree", func(t *testing.T) {
		a := create(configMap("chain-a", nil, nil))
		b := create(owned("chain-b", a))
		create(owned("chain-c", b))
		fg := metav1.DeletePropagationForeground
		if err := cms.Delete(ctx, "chain-a", metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
			t.Fatal(err)
		}
		waitGone(cms, "chain-a")
		// Every dependent blocks its owner: when the top owner is gone, the whole chain is.
		for _, name := range []string{"chain-b", "chain-c"} {
			if exists(cms, name) {
				t.Errorf("%s outlived the foreground deletion of chain-a", name)
			}
		}
	})

	t.Run("CustomResourceOwner", func(t *testing.T) {
		crd := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": crdsGVR.GroupVersion().String(), "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": "gcowners.gc.example.com"},
			"spec": map[string]any{
				"group": "gc.example.com", "scope": "Namespaced",
				"names": map[string]any{"plural": "gcowners", "singular": "gcowner", "kind": "GCOwner", "listKind": "GCOwnerList"},
				"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
					"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
			},
		}}
		if _, err := dyn.Resource(crdsGVR).Get(ctx, crd.GetName(), metav1.GetOptions{}); apierrors.IsNotFound(err) {
			createEstablished(t, ctx, dyn, crd)
		}
		owners := dyn.Resource(gcOwnersGVR).Namespace(ns)
		app, err := owners.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "gc.example.com/v1", "kind": "GCOwner", "metadata": map[string]any{"name": "app"},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		create(owned("app-config", app))
		secret := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "app-secret"}}}
		secret.SetOwnerReferences(owned("x", app).GetOwnerReferences())
		secrets := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}).Namespace(ns)
		if _, err := secrets.Create(ctx, secret, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := owners.Delete(ctx, "app", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitGone(cms, "app-config")
		waitGone(secrets, "app-secret")
	})

	t.Run("OwnerRecreatedWithSameName", func(t *testing.T) {
		old := create(configMap("recreated", nil, nil))
		create(owned("of-old", old))
		if err := cms.Delete(ctx, "recreated", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		fresh := create(configMap("recreated", nil, nil))
		create(owned("of-fresh", fresh))
		waitGone(cms, "of-old")
		if !exists(cms, "of-fresh") || !exists(cms, "recreated") {
			t.Errorf("the re-created owner or its own dependent was collected")
		}
	})
}
