// Command webhookserver is the validating admission webhook test/compose runs as a container on
// the compose stack's network (a static binary mounted into one of Platform's images), so that
// the admission container calls it over HTTPS with the caBundle the test registers.
//
// POST /validate takes an admission.k8s.io/v1 AdmissionReview and denies an object labelled
// compose-webhook=deny (reason in the message, code 403), allows anything else. Every call is
// logged on stdout as one line "review <operation> <namespace>/<name> <allowed|denied>", which the
// test reads back with `docker logs`.
package main

import (
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DenyMessage is the reason a denied object is refused with (the test looks for it in the API error).
const DenyMessage = "compose-webhook says no: the object is labelled compose-webhook=deny"

func main() {
	listen := flag.String("listen", ":8443", "HTTPS address")
	certFile := flag.String("cert-file", "/hook/tls.crt", "serving certificate")
	keyFile := flag.String("key-file", "/hook/tls.key", "serving key")
	flag.Parse()
	cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		log.Fatalf("webhookserver: %v", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/validate", validate)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	srv := &http.Server{
		Addr: *listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
	}
	fmt.Println("webhookserver: serving on", *listen)
	if err := srv.ListenAndServeTLS("", ""); err != nil {
		log.Fatalf("webhookserver: %v", err)
	}
}

func validate(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	body, err := io.ReadAll(io.LimitReader(r.Body, 3<<20))
	if err == nil {
		err = json.Unmarshal(body, &review)
	}
	if err != nil || review.Request == nil {
		http.Error(w, fmt.Sprintf("not an AdmissionReview: %v", err), http.StatusBadRequest)
		return
	}
	req := review.Request
	var obj metav1.PartialObjectMetadata
	if len(req.Object.Raw) > 0 {
		if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
			http.Error(w, "object: "+err.Error(), http.StatusBadRequest)
			return
		}
	}
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: obj.Labels["compose-webhook"] != "deny"}
	verdict := "allowed"
	if !resp.Allowed {
		verdict = "denied"
		resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: DenyMessage}
	}
	fmt.Fprintf(os.Stdout, "review %s %s/%s %s\n", req.Operation, req.Namespace, req.Name, verdict)
	out, _ := json.Marshal(admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}
