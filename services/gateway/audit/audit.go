package audit

import (
	"bytes"
	"context"
	"encoding/json"

	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/natefinch/lumberjack.v2"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"platform.io/libs/naming"
	"platform.io/services/gateway/auth"
)

// Event is one audit record, upstream's audit.k8s.io/v1 Event (apiVersion in Platform's group).
type Event struct {
	metav1.TypeMeta          `json:",inline"`
	Level                    Level                      `json:"level"`
	AuditID                  types.UID                  `json:"auditID"`
	Stage                    Stage                      `json:"stage"`
	RequestURI               string                     `json:"requestURI"`
	Verb                     string                     `json:"verb"`
	User                     authenticationv1.UserInfo  `json:"user"`
	ImpersonatedUser         *authenticationv1.UserInfo `json:"impersonatedUser,omitempty"`
	SourceIPs                []string                   `json:"sourceIPs,omitempty"`
	UserAgent                string                     `json:"userAgent,omitempty"`
	ObjectRef                *ObjectReference           `json:"objectRef,omitempty"`
	ResponseStatus           *metav1.Status             `json:"responseStatus,omitempty"`
	RequestObject            json.RawMessage            `json:"requestObject,omitempty"`
	ResponseObject           json.RawMessage            `json:"responseObject,omitempty"`
	RequestReceivedTimestamp metav1.MicroTime           `json:"requestReceivedTimestamp"`
	StageTimestamp           metav1.MicroTime           `json:"stageTimestamp"`
	Annotations              map[string]string          `json:"annotations,omitempty"`
}

// ObjectReference is what a resource request is about.
type ObjectReference struct {
	Resource    string `json:"resource,omitempty"`
	Namespace   string `json:"namespace,omitempty"`
	Name        string `json:"name,omitempty"`
	APIGroup    string `json:"apiGroup,omitempty"`
	APIVersion  string `json:"apiVersion,omitempty"`
	Subresource string `json:"subresource,omitempty"`
}

// Options configure an Auditor (the --audit-* flags).
type Options struct {
	// PolicyFile is the audit policy; empty turns auditing off.
	PolicyFile string
	// LogPath is the log file, "-" for standard output; empty turns auditing off.
	LogPath string
	// MaxAge (days), MaxBackups and MaxSize (megabytes) rotate the log file (0: no limit).
	MaxAge, MaxBackups, MaxSize int
	// Format is the line format; only "json" is supported.
	Format string
	// Stdout receives events when LogPath is "-" (os.Stdout when nil).
	Stdout io.Writer
	// ProtobufToJSON turns a Protobuf body (the envelope with its kind) into the object's JSON,
	// so that bodies of binary clients (kubectl, client-go) are recorded like JSON ones. Without it
	// they are left out.
	ProtobufToJSON func([]byte) ([]byte, error)
}

// maxBody bounds the request and response bodies an event records; larger bodies are left out
// (the event says so in an annotation).
const maxBody = 3 << 20

// Auditor records the requests its policy selects.
type Auditor struct {
	policy *Policy
	proto  func([]byte) ([]byte, error)
	out    io.Writer
	closer io.Closer
	mu     sync.Mutex
	log    *slog.Logger
	events *prometheus.CounterVec
	errs   prometheus.Counter
}

// New builds the Auditor of opts, or nil (auditing off) when no policy or log path is given.
func New(opts Options, log *slog.Logger, metrics prometheus.Registerer) (*Auditor, error) {
	if opts.PolicyFile == "" || opts.LogPath == "" {
		return nil, nil
	}
	if opts.Format != "" && opts.Format != "json" {
		return nil, fmt.Errorf("--audit-log-format %q: only json is supported", opts.Format)
	}
	p, err := LoadPolicy(opts.PolicyFile)
	if err != nil {
		return nil, fmt.Errorf("--audit-policy-file: %w", err)
	}
	a := &Auditor{policy: p, log: log, proto: opts.ProtobufToJSON,
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "apiserver_audit_event_total", Help: "Counter of audit events generated and sent to the audit backend."}, []string{"level"}),
		errs:   prometheus.NewCounter(prometheus.CounterOpts{Name: "apiserver_audit_error_total", Help: "Counter of audit events that failed to be audited properly.", ConstLabels: prometheus.Labels{"plugin": "log"}}),
	}
	if metrics != nil {
		metrics.MustRegister(a.events, a.errs)
	}
	if opts.LogPath == "-" {
		a.out = opts.Stdout
		if a.out == nil {
			a.out = os.Stdout
		}
		return a, nil
	}
	f, err := os.OpenFile(opts.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--audit-log-path: %w", err)
	}
	_ = f.Close()
	lj := &lumberjack.Logger{Filename: opts.LogPath, MaxAge: opts.MaxAge, MaxBackups: opts.MaxBackups, MaxSize: opts.MaxSize}
	if lj.MaxSize == 0 {
		// lumberjack reads 0 as its 100 MB default; upstream's 0 means no size limit.
		lj.MaxSize = 1 << 30
	}
	a.out, a.closer = lj, lj
	return a, nil
}

// Close flushes and closes the log file.
func (a *Auditor) Close() error {
	if a == nil || a.closer == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.closer.Close()
}

func (a *Auditor) write(ev *Event) {
	ev.TypeMeta = metav1.TypeMeta{Kind: "Event", APIVersion: naming.Group("audit.k8s.io") + "/v1"}
	line, err := json.Marshal(ev)
	if err != nil {
		a.errs.Inc()
		a.log.Error("encoding an audit event", "err", err, "audit_id", string(ev.AuditID))
		return
	}
	line = append(line, '\n')
	a.mu.Lock()
	_, err = a.out.Write(line)
	a.mu.Unlock()
	if err != nil {
		a.errs.Inc()
		a.log.Error("writing an audit event", "err", err, "audit_id", string(ev.AuditID))
		return
	}
	a.events.WithLabelValues(string(ev.Level)).Inc()
}

type recordKey struct{}

// record is one request's audit state.
type record struct {
	a        *Auditor
	mu       sync.Mutex
	ev       Event
	cfg      RequestConfig
	decided  bool
	watch    bool
	started  bool
	request  bytes.Buffer
	tooLarge bool
	reqType  string
}

func from(ctx context.Context) *record {
	r, _ := ctx.Value(recordKey{}).(*record)
	return r
}

// Begin tells the request's record who asks for what (called once the caller is authenticated,
// or refused, with a nil user): the policy decides the level and RequestReceived is written.
// Without auditing it does nothing.
func Begin(ctx context.Context, attrs Attributes) {
	r := from(ctx)
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.decided {
		return
	}
	r.decide(attrs)
	r.emit(StageRequestReceived)
}

// decide evaluates the policy (r.mu held).
func (r *record) decide(attrs Attributes) {
	r.decided = true
	r.cfg = r.a.policy.Evaluate(attrs)
	r.ev.Level = r.cfg.Level
	r.ev.Verb = attrs.Verb
	r.ev.User = auth.UserInfo(attrs.User)
	r.watch = attrs.Verb == "watch"
	if attrs.ResourceRequest {
		r.ev.ObjectRef = &ObjectReference{Resource: attrs.Resource, Namespace: attrs.Namespace, Name: attrs.Name,
			APIGroup: attrs.APIGroup, APIVersion: attrs.APIVersion, Subresource: attrs.Subresource}
	}
}

// SetImpersonatedUser records the identity the request runs as when it impersonates.
func SetImpersonatedUser(ctx context.Context, u *auth.User) {
	if r := from(ctx); r != nil && u != nil {
		r.mu.Lock()
		info := auth.UserInfo(u)
		r.ev.ImpersonatedUser = &info
		r.mu.Unlock()
	}
}

// AddAnnotation adds an annotation to the request's events (kept at every level but None).
func AddAnnotation(ctx context.Context, key, value string) {
	AddAnnotationAtLevel(ctx, LevelMetadata, key, value)
}

// AddAnnotationAtLevel adds an annotation kept only when the request is recorded at least at
// level (the patch annotations of mutating webhooks are Request-level, as upstream).
func AddAnnotationAtLevel(ctx context.Context, level Level, key, value string) {
	r := from(ctx)
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.decided && !r.cfg.Level.AtLeast(level) {
		return
	}
	if r.ev.Annotations == nil {
		r.ev.Annotations = map[string]string{}
	}
	if _, ok := r.ev.Annotations[key]; !ok {
		r.ev.Annotations[key] = value
	}
}

// Enabled tells whether the request is being recorded (at any level but None).
func Enabled(ctx context.Context) bool {
	r := from(ctx)
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.decided || r.cfg.Level != LevelNone
}

// emit writes the event at stage unless the level is None or the stage is omitted (r.mu held).
func (r *record) emit(stage Stage) {
	if r.cfg.Level == LevelNone || slices.Contains(r.cfg.OmitStages, stage) {
		return
	}
	ev := r.ev
	ev.Stage = stage
	ev.StageTimestamp = metav1.NewMicroTime(time.Now())
	ev.Annotations = cloneMap(r.ev.Annotations)
	r.a.write(&ev)
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// Handler records every request of next. A nil Auditor returns next unchanged.
func (a *Auditor) Handler(next http.Handler) http.Handler {
	if a == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rec := &record{a: a, reqType: mediaType(req.Header.Get("Content-Type"))}
		rec.ev.AuditID = types.UID(w.Header().Get("Audit-Id"))
		rec.ev.RequestURI = req.URL.RequestURI()
		rec.ev.UserAgent = req.UserAgent()
		rec.ev.SourceIPs = sourceIPs(req)
		rec.ev.RequestReceivedTimestamp = metav1.NewMicroTime(time.Now())
		if req.Body != nil && req.Body != http.NoBody {
			req.Body = &teeBody{ReadCloser: req.Body, rec: rec}
		}
		rw := &responseWriter{ResponseWriter: w, rec: rec, code: http.StatusOK}
		completed := false
		defer func() {
			if completed {
				return
			}
			p := recover()
			rec.finish(rw, req, true)
			if p != nil {
				panic(p)
			}
		}()
		next.ServeHTTP(rw, req.WithContext(context.WithValue(req.Context(), recordKey{}, rec)))
		completed = true
		rec.finish(rw, req, false)
	})
}

// finish writes the last event: ResponseComplete, or Panic when the handler panicked.
func (r *record) finish(rw *responseWriter, req *http.Request, panicked bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.decided {
		// Never reached the API's access control (health, unknown paths): a non-resource
		// request of an unknown caller.
		r.decide(Attributes{Verb: strings.ToLower(req.Method), Path: req.URL.Path})
		r.emit(StageRequestReceived)
	}
	if r.cfg.Level == LevelNone {
		return
	}
	if panicked {
		r.ev.ResponseStatus = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Reason: metav1.StatusReasonInternalError,
			Message: "APIServer panic'd"}
		r.emit(StagePanic)
		return
	}
	r.ev.ResponseStatus = rw.status()
	if r.cfg.Level.AtLeast(LevelRequest) {
		r.ev.RequestObject = r.body(r.request.Bytes(), r.reqType, r.tooLarge, "request")
	}
	if r.cfg.Level.AtLeast(LevelRequestResponse) && !r.watch {
		r.ev.ResponseObject = r.body(rw.body.Bytes(), mediaType(rw.Header().Get("Content-Type")), rw.tooLarge || rw.Header().Get("Content-Encoding") != "", "response")
	}
	r.emit(StageResponseComplete)
}

// body is a recorded body as JSON: JSON as it came (managed fields dropped when the policy
// says so), YAML converted; other encodings (Protobuf) and bodies over maxBody are left out with
// an annotation saying why.
func (r *record) body(data []byte, media string, tooLarge bool, which string) json.RawMessage {
	if len(data) == 0 && !tooLarge {
		return nil
	}
	note := func(why string) json.RawMessage {
		if r.ev.Annotations == nil {
			r.ev.Annotations = map[string]string{}
		}
		r.ev.Annotations[naming.Group("audit.k8s.io")+"/"+which+"-object-omitted"] = why
		return nil
	}
	if tooLarge {
		return note(fmt.Sprintf("larger than %d bytes", maxBody))
	}
	switch {
	case media == "application/json" || strings.HasSuffix(media, "+json") || strings.HasSuffix(media, "-patch+json"):
	case media == "application/yaml":
		j, err := yaml.YAMLToJSON(data)
		if err != nil {
			return note("not valid YAML")
		}
		data = j
	case (media == naming.ProtobufMediaType || media == naming.UpstreamProtobufMediaType) && r.a.proto != nil:
		j, err := r.a.proto(data)
		if err != nil {
			return note("Protobuf not decoded: " + err.Error())
		}
		data = j
	default:
		return note("encoded as " + media)
	}
	if !json.Valid(data) {
		return note("not valid JSON")
	}
	if r.cfg.OmitManagedFields {
		data = dropManagedFields(data)
	}
	return json.RawMessage(data)
}

// dropManagedFields removes metadata.managedFields from an object or from every item of a list.
func dropManagedFields(data []byte) []byte {
	var obj map[string]any
	if json.Unmarshal(data, &obj) != nil {
		return data
	}
	strip := func(o map[string]any) {
		if md, ok := o["metadata"].(map[string]any); ok {
			delete(md, "managedFields")
		}
	}
	strip(obj)
	if items, ok := obj["items"].([]any); ok {
		for _, it := range items {
			if o, ok := it.(map[string]any); ok {
				strip(o)
			}
		}
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return data
	}
	return out
}

func mediaType(ct string) string {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// sourceIPs are X-Forwarded-For's addresses, X-Real-Ip, then the peer's, as upstream lists them.
func sourceIPs(r *http.Request) []string {
	var ips []string
	for _, h := range r.Header.Values("X-Forwarded-For") {
		for _, ip := range strings.Split(h, ",") {
			if ip = strings.TrimSpace(ip); net.ParseIP(ip) != nil && !slices.Contains(ips, ip) {
				ips = append(ips, ip)
			}
		}
	}
	if ip := strings.TrimSpace(r.Header.Get("X-Real-Ip")); net.ParseIP(ip) != nil && !slices.Contains(ips, ip) {
		ips = append(ips, ip)
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if host != "" && !slices.Contains(ips, host) {
		ips = append(ips, host)
	}
	return ips
}

// teeBody keeps a copy of the request body as the API reads it, when the level wants it.
type teeBody struct {
	io.ReadCloser
	rec *record
}

func (t *teeBody) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if n > 0 {
		r := t.rec
		r.mu.Lock()
		if (!r.decided || r.cfg.Level.AtLeast(LevelRequest)) && !r.tooLarge {
			if r.request.Len()+n > maxBody {
				r.tooLarge = true
				r.request.Reset()
			} else {
				r.request.Write(p[:n])
			}
		}
		r.mu.Unlock()
	}
	return n, err
}

// responseWriter records the status code, the response body when the level wants it (or a
// failure's Status), and writes ResponseStarted when a long-running request starts answering.
type responseWriter struct {
	http.ResponseWriter
	rec      *record
	code     int
	wrote    bool
	body     bytes.Buffer
	tooLarge bool
}

func (w *responseWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		w.code = code
		r := w.rec
		r.mu.Lock()
		if r.decided && r.watch && !r.started {
			r.started = true
			r.ev.ResponseStatus = &metav1.Status{Code: int32(code)}
			r.emit(StageResponseStarted)
		}
		r.mu.Unlock()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	r := w.rec
	r.mu.Lock()
	keep := !r.watch && !w.tooLarge && (w.code >= 400 || !r.decided || r.cfg.Level.AtLeast(LevelRequestResponse))
	r.mu.Unlock()
	if keep {
		if w.body.Len()+len(p) > maxBody {
			w.tooLarge = true
			w.body.Reset()
		} else {
			w.body.Write(p)
		}
	}
	return w.ResponseWriter.Write(p)
}

// Flush passes through (watches stream).
func (w *responseWriter) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// status is the event's responseStatus: the code, and for failures the Status the API answered.
func (w *responseWriter) status() *metav1.Status {
	s := &metav1.Status{Code: int32(w.code)}
	if w.code >= 400 && mediaType(w.Header().Get("Content-Type")) == "application/json" && !w.tooLarge {
		var answered metav1.Status
		if err := json.Unmarshal(w.body.Bytes(), &answered); err == nil && answered.Kind == "Status" {
			answered.TypeMeta = metav1.TypeMeta{}
			answered.Code = int32(w.code)
			return &answered
		}
	}
	if w.code >= 400 {
		s.Status = metav1.StatusFailure
	}
	return s
}
