package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"

	"platform.io/libs/naming"
	"platform.io/test/stack"
)

// One Event store, through client-go's event recorders: the core v1 recorder (tools/record) writes
// events that the events v1 API reads with the spec's mapping; in the kubernetes naming profile
// the events v1 recorder (tools/events, client-go's typed events.k8s.io client) writes events
// that the core API reads.
func TestEventRecordersOneStore(t *testing.T) {
	s := useShared(t)
	dyn := dynamicClient(t, s)
	ns := createNamespace(t, dyn, "e2e-events-")
	c, err := kubernetes.NewForConfig(restConfig(t, s, "e2e-admin"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 60*time.Second)
	cm, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "subject"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventsV1 := dyn.Resource(schema.GroupVersionResource{Group: naming.Group("events.k8s.io"), Version: "v1", Resource: "events"}).Namespace(ns)

	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.CoreV1().Events(ns)})
	t.Cleanup(broadcaster.Shutdown)
	broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "e2e-recorder", Host: "e2e-host"}).Event(cm, corev1.EventTypeNormal, "Tested", "recorded through core v1")
	var got *unstructured.Unstructured
	stack.Eventually(t, 30*time.Second, "the core recorder's event through events v1", func() error {
		list, err := eventsV1.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for i := range list.Items {
			if note, _, _ := unstructured.NestedString(list.Items[i].Object, "note"); note == "recorded through core v1" {
				got = &list.Items[i]
				return nil
			}
		}
		return fmt.Errorf("%d events, none with the note", len(list.Items))
	})
	regarding, _, _ := unstructured.NestedString(got.Object, "regarding", "name")
	component, _, _ := unstructured.NestedString(got.Object, "deprecatedSource", "component")
	reason, _, _ := unstructured.NestedString(got.Object, "reason")
	if regarding != "subject" || component != "e2e-recorder" || reason != "Tested" {
		t.Errorf("events v1 view: regarding %q, deprecatedSource.component %q, reason %q", regarding, component, reason)
	}

	if naming.ProfileName() != naming.KubernetesProfile {
		return // client-go's typed events.k8s.io client needs upstream's group name
	}
	eb := events.NewBroadcaster(&events.EventSinkImpl{Interface: c.EventsV1()})
	stop := make(chan struct{})
	eb.StartRecordingToSink(stop)
	t.Cleanup(func() { close(stop); eb.Shutdown() })
	eb.NewRecorder(scheme.Scheme, "e2e.example.com/recorder").Eventf(cm, nil, corev1.EventTypeWarning, "Checked", "Checking", "recorded through %s", "events v1")
	stack.Eventually(t, 30*time.Second, "the events v1 recorder's event through core v1", func() error {
		list, err := c.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=Checked"})
		if err != nil {
			return err
		}
		for _, ev := range list.Items {
			if ev.Message == "recorded through events v1" && ev.InvolvedObject.Name == "subject" && ev.ReportingController == "e2e.example.com/recorder" && ev.Action == "Checking" {
				return nil
			}
		}
		return fmt.Errorf("core events with reason Checked: %+v", list.Items)
	})
}
