package server_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.io/libs/serviceaccount"
	"platform.io/libs/storage"
	authnv1 "platform.io/proto/authn/v1"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/authn/server"
	storageserver "platform.io/services/storage/server"
)

// BenchmarkColdDecision is the cost of one uncached decision as the gateway pays it: a gRPC call
// over loopback to the authentication service, the method's checks and, for service account
// tokens, the consistent storage reads of the account (and the bound pod).
func BenchmarkColdDecision(b *testing.B) {
	sc := storageserver.DefaultConfig()
	sc.DataDir = filepath.Join(b.TempDir(), "storage")
	sc.Listen = "127.0.0.1:0"
	st, err := storageserver.Start(context.Background(), sc, discard)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Stop(context.Background())
	stConn, err := grpc.NewClient(st.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer stConn.Close()
	put := func(resource, kind string, obj storage.Marshaler, ns, name string) {
		value, err := storage.EncodeStored("v1", kind, obj)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := storage.NewClient(stConn).Create(context.Background(), &storagev1.CreateRequest{Type: &storagev1.ResourceType{Resource: resource},
			Object: &storagev1.Object{Namespace: ns, Name: name, Value: value}}); err != nil {
			b.Fatal(err)
		}
	}
	put("serviceaccounts", "ServiceAccount", &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot", Namespace: "default", UID: "sa-uid"}}, "default", "robot")
	put("pods", "Pod", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "default", UID: "pod-uid"}}, "default", "job")

	e := start(b, func(c *server.Config) { c.Storage.Address = st.Addr().String() })
	key, err := serviceaccount.LoadSigningKey(e.saKey)
	if err != nil {
		b.Fatal(err)
	}
	iss, err := serviceaccount.NewIssuer("https://platform.test", key)
	if err != nil {
		b.Fatal(err)
	}
	bound := func(obj *serviceaccount.BoundObject) string {
		tok, _, err := iss.IssueBound(serviceaccount.BoundRequest{Namespace: "default", Name: "robot", UID: "sa-uid",
			Audiences: []string{"https://platform.test"}, Expiration: time.Hour, BoundObject: obj})
		if err != nil {
			b.Fatal(err)
		}
		return tok
	}
	for _, bc := range []struct {
		name string
		req  *authnv1.AuthenticateRequest
	}{
		{"token-file", &authnv1.AuthenticateRequest{Token: "s3cret"}},
		{"x509", &authnv1.AuthenticateRequest{PeerCertificates: [][]byte{e.cert(b, "alice", "dev")}}},
		{"serviceaccount", &authnv1.AuthenticateRequest{Token: bound(nil)}},
		{"serviceaccount-pod-bound", &authnv1.AuthenticateRequest{Token: bound(&serviceaccount.BoundObject{Kind: serviceaccount.KindPod, Name: "job", UID: "pod-uid"})}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			for i := 0; i < b.N; i++ {
				resp, err := e.client.Authenticate(ctx, bc.req)
				if err != nil || !resp.Authenticated {
					b.Fatalf("%v %v", resp, err)
				}
			}
		})
	}
}
