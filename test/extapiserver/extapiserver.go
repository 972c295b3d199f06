// Package extapiserver is a small extension API server for the aggregation tests: it serves
// discovery and OpenAPI v3 for one group version (wardle.example.com/v1alpha1) and one
// namespaced resource, flunders (get, list, watch, create, merge patch, delete), over TLS. Like upstream's extension servers it
// trusts the identity in the front-proxy headers (X-Remote-User, X-Remote-Group,
// X-Remote-Extra-*) only after verifying the caller's client certificate against its
// requestheader CA (and, when set, its allowed names); other callers are answered 401.
package extapiserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// The group version, resource and kind served.
const (
	Group    = "wardle.example.com"
	Version  = "v1alpha1"
	Resource = "flunders"
	Kind     = "Flunder"
)

// GroupVersion is Group/Version.
var GroupVersion = Group + "/" + Version

// Config configures a server.
type Config struct {
	// Address to listen on (default 127.0.0.1:0).
	Address string
	// Serving is the serving certificate (for <service>.<namespace>.svc).
	Serving tls.Certificate
	// RequestHeaderCA verifies the front proxy's client certificate; AllowedNames, when set,
	// lists the common names the proxy certificate may have.
	RequestHeaderCA *x509.CertPool
	AllowedNames    []string
}

// User is an identity read from the front-proxy headers.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
	// Path is the request's path; Authorization says whether the request still carried an
	// Authorization header (the front proxy must remove it).
	Path          string
	Authorization bool
}

// Server is a running extension API server.
type Server struct {
	cfg  Config
	lis  net.Listener
	http *http.Server

	mu      sync.Mutex
	rv      int64
	objects map[string]*unstructured.Unstructured // by namespace/name
	history []event
	wake    chan struct{} // closed and replaced on every change
	users   []User
}

type event struct {
	Type   string
	rv     int64
	Object *unstructured.Unstructured
}

// Start serves until Stop.
func Start(cfg Config) (*Server, error) {
	if cfg.Address == "" {
		cfg.Address = "127.0.0.1:0"
	}
	if cfg.RequestHeaderCA == nil {
		return nil, errors.New("extapiserver: a requestheader CA is required")
	}
	lis, err := net.Listen("tcp", cfg.Address)
	if err != nil {
		return nil, err
	}
	return serve(cfg, lis), nil
}

func serve(cfg Config, lis net.Listener) *Server {
	s := &Server{cfg: cfg, objects: map[string]*unstructured.Unstructured{}, wake: make(chan struct{}), rv: 1}
	s.listen(lis)
	return s
}

// listen serves HTTPS on lis.
func (s *Server) listen(lis net.Listener) {
	srv := &http.Server{
		Handler: http.HandlerFunc(s.serveHTTP),
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{s.cfg.Serving},
			ClientCAs:    s.cfg.RequestHeaderCA,
			ClientAuth:   tls.VerifyClientCertIfGiven,
			MinVersion:   tls.VersionTLS12,
			NextProtos:   []string{"h2", "http/1.1"},
		},
		ReadHeaderTimeout: 10 * time.Second,
	}
	s.mu.Lock()
	s.lis, s.http = lis, srv
	s.mu.Unlock()
	go func() { _ = srv.ServeTLS(lis, "", "") }()
}

// Restart serves again on the same address after Stop, with the same objects.
func (s *Server) Restart() error {
	lis, err := net.Listen("tcp", s.Addr())
	if err != nil {
		return err
	}
	s.listen(lis)
	return nil
}

// Addr is host:port the server listens on.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lis.Addr().String()
}

// Port is the port the server listens on.
func (s *Server) Port() int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int32(s.lis.Addr().(*net.TCPAddr).Port)
}

// Stop closes the listener and every connection (open watches end).
func (s *Server) Stop() {
	s.mu.Lock()
	srv := s.http
	s.mu.Unlock()
	_ = srv.Close()
}

// Users returns the identities of the requests served so far.
func (s *Server) Users() []User {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.users)
}

// authenticate reads the front-proxy headers of a request whose client certificate the
// requestheader CA verified (the TLS handshake verified the chain).
func (s *Server) authenticate(r *http.Request) (*User, error) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
		return nil, errors.New("no client certificate verified by the requestheader CA")
	}
	if len(s.cfg.AllowedNames) > 0 && !slices.Contains(s.cfg.AllowedNames, r.TLS.PeerCertificates[0].Subject.CommonName) {
		return nil, fmt.Errorf("client certificate %q is not an allowed front proxy", r.TLS.PeerCertificates[0].Subject.CommonName)
	}
	name := r.Header.Get("X-Remote-User")
	if name == "" {
		return nil, errors.New("no X-Remote-User header")
	}
	u := &User{Name: name, UID: r.Header.Get("X-Remote-Uid"), Groups: r.Header.Values("X-Remote-Group"), Path: r.URL.Path, Authorization: r.Header.Get("Authorization") != ""}
	for k, v := range r.Header {
		if rest, ok := strings.CutPrefix(k, "X-Remote-Extra-"); ok {
			key, err := url.PathUnescape(rest)
			if err != nil {
				key = rest
			}
			if u.Extra == nil {
				u.Extra = map[string][]string{}
			}
			u.Extra[strings.ToLower(key)] = append(u.Extra[strings.ToLower(key)], v...)
		}
	}
	return u, nil
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
		_, _ = w.Write([]byte("ok"))
		return
	}
	u, err := s.authenticate(r)
	if err != nil {
		writeStatus(w, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "Unauthorized: "+err.Error())
		return
	}
	s.mu.Lock()
	s.users = append(s.users, *u)
	s.mu.Unlock()
	path := strings.TrimSuffix(r.URL.Path, "/")
	if r.Method == http.MethodGet && serveOpenAPI(w, path) {
		return
	}
	base := "/apis/" + GroupVersion
	switch {
	case path == "/apis/"+Group:
		gv := metav1.GroupVersionForDiscovery{GroupVersion: GroupVersion, Version: Version}
		writeJSON(w, http.StatusOK, metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}, Name: Group, Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv})
		return
	case path == base:
		writeJSON(w, http.StatusOK, metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: GroupVersion,
			APIResources: []metav1.APIResource{{Name: Resource, SingularName: "flunder", Namespaced: true, Kind: Kind, ShortNames: []string{"fl"},
				Verbs: metav1.Verbs{"create", "delete", "get", "list", "patch", "watch"}}}})
		return
	}
	rest, ok := strings.CutPrefix(path, base+"/")
	if !ok {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource")
		return
	}
	parts := strings.Split(rest, "/")
	namespace := ""
	if len(parts) >= 3 && parts[0] == "namespaces" {
		namespace, parts = parts[1], parts[2:]
	}
	if parts[0] != Resource || len(parts) > 2 {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource")
		return
	}
	name := ""
	if len(parts) == 2 {
		name = parts[1]
	}
	q := r.URL.Query()
	switch {
	case r.Method == http.MethodGet && name == "" && (q.Get("watch") == "true" || q.Get("watch") == "1"):
		s.watch(w, r, namespace)
	case r.Method == http.MethodGet && name == "":
		s.list(w, namespace)
	case r.Method == http.MethodGet:
		s.get(w, namespace, name)
	case r.Method == http.MethodPost && name == "" && namespace != "":
		s.create(w, r, namespace)
	case r.Method == http.MethodDelete && name != "" && namespace != "":
		s.remove(w, namespace, name)
	case r.Method == http.MethodPatch && name != "" && namespace != "":
		s.patch(w, r, namespace, name)
	default:
		writeStatus(w, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, "the server does not allow this method on the requested resource")
	}
}

func (s *Server) get(w http.ResponseWriter, namespace, name string) {
	s.mu.Lock()
	obj := s.objects[namespace+"/"+name]
	s.mu.Unlock()
	if obj == nil {
		writeStatusDetails(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("%s.%s %q not found", Resource, Group, name), name)
		return
	}
	writeJSON(w, http.StatusOK, obj.Object)
}

func (s *Server) list(w http.ResponseWriter, namespace string) {
	s.mu.Lock()
	items := []any{}
	keys := make([]string, 0, len(s.objects))
	for k, o := range s.objects {
		if namespace == "" || o.GetNamespace() == namespace {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		items = append(items, s.objects[k].Object)
	}
	rv := s.rv
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"kind": Kind + "List", "apiVersion": GroupVersion,
		"metadata": map[string]any{"resourceVersion": strconv.FormatInt(rv, 10)}, "items": items,
	})
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, namespace string) {
	obj := &unstructured.Unstructured{}
	if err := json.NewDecoder(r.Body).Decode(&obj.Object); err != nil || obj.Object == nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Sprintf("the request body is not a JSON object: %v", err))
		return
	}
	if obj.GetKind() != Kind || obj.GetAPIVersion() != GroupVersion {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Sprintf("the body must be a %s %s", GroupVersion, Kind))
		return
	}
	if obj.GetNamespace() != "" && obj.GetNamespace() != namespace {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, "the namespace of the object does not match the namespace of the request")
		return
	}
	if obj.GetName() == "" {
		writeStatus(w, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "metadata.name: Required value")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := namespace + "/" + obj.GetName()
	if s.objects[key] != nil {
		writeStatusDetails(w, http.StatusConflict, metav1.StatusReasonAlreadyExists, fmt.Sprintf("%s.%s %q already exists", Resource, Group, obj.GetName()), obj.GetName())
		return
	}
	s.rv++
	obj.SetNamespace(namespace)
	obj.SetUID(uuid.NewUUID())
	obj.SetCreationTimestamp(metav1.Now())
	obj.SetResourceVersion(strconv.FormatInt(s.rv, 10))
	s.objects[key] = obj
	s.record("ADDED", obj)
	writeJSON(w, http.StatusCreated, obj.Object)
}

func (s *Server) remove(w http.ResponseWriter, namespace, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := namespace + "/" + name
	obj := s.objects[key]
	if obj == nil {
		writeStatusDetails(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("%s.%s %q not found", Resource, Group, name), name)
		return
	}
	delete(s.objects, key)
	s.rv++
	obj = obj.DeepCopy()
	obj.SetResourceVersion(strconv.FormatInt(s.rv, 10))
	s.record("DELETED", obj)
	writeJSON(w, http.StatusOK, obj.Object)
}

// patch applies a JSON merge patch to an object (its name, namespace and uid stay).
func (s *Server) patch(w http.ResponseWriter, r *http.Request, namespace, name string) {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/merge-patch+json") {
		writeStatus(w, http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType, "the body of the request was in an unknown format - accepted media types include: application/merge-patch+json")
		return
	}
	patch, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := namespace + "/" + name
	cur := s.objects[key]
	if cur == nil {
		writeStatusDetails(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("%s.%s %q not found", Resource, Group, name), name)
		return
	}
	doc, _ := json.Marshal(cur.Object)
	patched, err := jsonpatch.MergePatch(doc, patch)
	if err != nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, "the patch is malformed: "+err.Error())
		return
	}
	next := &unstructured.Unstructured{}
	if err := json.Unmarshal(patched, &next.Object); err != nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error())
		return
	}
	s.rv++
	next.SetName(cur.GetName())
	next.SetNamespace(namespace)
	next.SetUID(cur.GetUID())
	next.SetCreationTimestamp(cur.GetCreationTimestamp())
	next.SetResourceVersion(strconv.FormatInt(s.rv, 10))
	s.objects[key] = next
	s.record("MODIFIED", next)
	writeJSON(w, http.StatusOK, next.Object)
}

// record appends an event and wakes the watches (mu held).
func (s *Server) record(typ string, obj *unstructured.Unstructured) {
	s.history = append(s.history, event{Type: typ, rv: s.rv, Object: obj.DeepCopy()})
	close(s.wake)
	s.wake = make(chan struct{})
}

// watch streams the events after ?resourceVersion (every object as ADDED first when it is
// empty or "0"), one JSON line each, until timeoutSeconds, the client or the server ends it.
func (s *Server) watch(w http.ResponseWriter, r *http.Request, namespace string) {
	q := r.URL.Query()
	ctx := r.Context()
	if t, err := strconv.Atoi(q.Get("timeoutSeconds")); err == nil && t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(t)*time.Second)
		defer cancel()
	}
	from, _ := strconv.ParseInt(q.Get("resourceVersion"), 10, 64)
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	send := func(typ string, obj *unstructured.Unstructured) bool {
		if namespace != "" && obj.GetNamespace() != namespace {
			return true
		}
		if err := enc.Encode(map[string]any{"type": typ, "object": obj.Object}); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	s.mu.Lock()
	var pending []event
	if from == 0 {
		for _, o := range s.objects {
			pending = append(pending, event{Type: "ADDED", Object: o.DeepCopy()})
		}
		from = s.rv
	}
	s.mu.Unlock()
	for _, ev := range pending {
		if !send(ev.Type, ev.Object) {
			return
		}
	}
	if flusher != nil {
		flusher.Flush()
	}
	for {
		s.mu.Lock()
		var next []event
		for _, ev := range s.history {
			if ev.rv > from {
				next = append(next, ev)
			}
		}
		wake := s.wake
		s.mu.Unlock()
		for _, ev := range next {
			if !send(ev.Type, ev.Object) {
				return
			}
			from = ev.rv
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		}
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	writeStatusDetails(w, code, reason, msg, "")
}

func writeStatusDetails(w http.ResponseWriter, code int, reason metav1.StatusReason, msg, name string) {
	st := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Message: msg, Reason: reason, Code: int32(code)}
	if name != "" {
		st.Details = &metav1.StatusDetails{Name: name, Group: Group, Kind: Resource}
	}
	writeJSON(w, code, st)
}
