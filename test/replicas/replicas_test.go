// Package replicas checks that replicas of the split stack on one Redis serve one consistent
// API (issue 16, "Replicas"): two gateways, each with a storage replica of its own (gateway A
// talks to storage A, gateway B to storage B), on one real redis-server, plus the
// authentication, authorization, admission and certificates services and two controllers
// processes (one per gateway) competing for the leader Lease. Everything is a real process
// started by test/stack; the clients are client-go's.
//
// The stack is started once, on first use, and shared by the tests of the package; they run one
// after another (none is parallel), and TestLeaderElectedControllers, which stops and kills
// controllers processes, does not disturb the others (they do not use the controllers).
package replicas

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"platform.io/libs/naming"
	"platform.io/test/stack"
)

// replicaSet is the shared stack with its second gateway and storage replica.
type replicaSet struct {
	s *stack.Stack
	// urlB is gateway B, which talks to the storage replica storageB (gateway A, s.URL, talks
	// to the stack's own storage service).
	urlB, storageB string
	// a and b are admin clients of gateway A and gateway B.
	a, b *kubernetes.Clientset
}

var (
	fixtureOnce sync.Once
	fixture     *replicaSet
	fixtureErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if fixture != nil {
		fixture.s.Stop()
		if code == 0 {
			_ = os.RemoveAll(fixture.s.Dir)
		} else {
			fmt.Fprintf(os.Stderr, "the replicas stack's logs are kept in %s\n", fixture.s.Dir)
		}
	}
	stack.CleanupBuild()
	os.Exit(code)
}

// replicas starts the shared stack on first use: the split stack (gateway A, storage A, one
// controllers process on gateway A), then storage B on the same Redis and gateway B on storage B.
func replicas(t *testing.T) *replicaSet {
	t.Helper()
	fixtureOnce.Do(func() {
		dir, err := os.MkdirTemp("", "platform-replicas-")
		if err != nil {
			fixtureErr = err
			return
		}
		s, err := stack.Start(stack.Options{Mode: stack.Split, Dir: dir, Metrics: true})
		if err != nil {
			fixtureErr = fmt.Errorf("starting the stack (logs in %s): %w", dir, err)
			return
		}
		rs := &replicaSet{s: s}
		fixture = rs
		if _, rs.storageB, err = s.StartStorageReplica(); err != nil {
			fixtureErr = fmt.Errorf("starting storage B (logs in %s): %w", dir, err)
			return
		}
		if rs.urlB, err = s.StartGatewayReplicaOn(rs.storageB); err != nil {
			fixtureErr = fmt.Errorf("starting gateway B (logs in %s): %w", dir, err)
			return
		}
		if rs.a, err = kubernetes.NewForConfig(rs.config(s.URL)); err != nil {
			fixtureErr = err
			return
		}
		rs.b, fixtureErr = kubernetes.NewForConfig(rs.config(rs.urlB))
	})
	if fixtureErr != nil {
		t.Fatal(fixtureErr)
	}
	return fixture
}

// config is an admin client-go configuration for the gateway at url, without client-side rate
// limits.
func (rs *replicaSet) config(url string) *rest.Config {
	cert, key, err := rs.s.ClientCert("replicas-admin", "system:masters")
	if err != nil {
		panic(err)
	}
	return &rest.Config{Host: url, TLSClientConfig: rest.TLSClientConfig{CAData: rs.s.CAPEM, CertData: cert, KeyData: key}, QPS: -1, UserAgent: "platform-replicas-test"}
}

// namespace creates a namespace through gateway A and deletes it at the end of the test.
func (rs *replicaSet) namespace(t *testing.T, prefix string) string {
	t.Helper()
	ns, err := rs.a.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rs.a.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{}) })
	return ns.Name
}

// logsOnFailure prints the tail of the named services' logs when t has failed.
func (rs *replicaSet) logsOnFailure(t *testing.T, names ...string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, name := range names {
			lines := strings.Split(strings.TrimRight(rs.s.Logs(name), "\n"), "\n")
			t.Logf("--- %s log (last lines; all in %s) ---\n%s", name, rs.s.Dir, strings.Join(lines[max(0, len(lines)-30):], "\n"))
		}
	})
}

func rvOf(t *testing.T, rv string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", rv, err)
	}
	return n
}

// A write through one gateway (and its storage replica) is seen at once by a "most recent" get
// and list (no resourceVersion) through the other: creates, updates and deletes, alternating the
// direction, with no wait between the write and the read. The namespace itself is created
// through A and written into through B at once.
func TestWriteOnOneReplicaReadOnTheOther(t *testing.T) {
	rs := replicas(t)
	rs.logsOnFailure(t, "storage", "gateway")
	ns := rs.namespace(t, "replicas-rw-")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	gateways := [2]struct {
		name string
		cm   func() typedcorev1.ConfigMapInterface
	}{
		{"A", func() typedcorev1.ConfigMapInterface { return rs.a.CoreV1().ConfigMaps(ns) }},
		{"B", func() typedcorev1.ConfigMapInterface { return rs.b.CoreV1().ConfigMaps(ns) }},
	}
	// listed finds name in a "most recent" list through r; the list must be at least at rv.
	listed := func(i int, dir string, r int, name string, rv int64) *corev1.ConfigMap {
		list, err := gateways[r].cm().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("%d %s: list: %v", i, dir, err)
		}
		if lrv := rvOf(t, list.ResourceVersion); lrv < rv {
			t.Fatalf("%d %s: the list is at revision %d, older than the write at %d", i, dir, lrv, rv)
		}
		for k := range list.Items {
			if list.Items[k].Name == name {
				return &list.Items[k]
			}
		}
		return nil
	}
	const rounds = 150
	for i := range rounds {
		w, r := i%2, 1-i%2
		dir := gateways[w].name + "->" + gateways[r].name
		name := fmt.Sprintf("cm-%03d", i)
		created, err := gateways[w].cm().Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"round": strconv.Itoa(i)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("%d %s: create: %v", i, dir, err)
		}
		got, err := gateways[r].cm().Get(ctx, name, metav1.GetOptions{})
		if err != nil || got.ResourceVersion != created.ResourceVersion {
			t.Fatalf("%d %s: get right after the create at %s: %v %v", i, dir, created.ResourceVersion, got.GetResourceVersion(), err)
		}
		if item := listed(i, dir, r, name, rvOf(t, created.ResourceVersion)); item == nil || item.ResourceVersion != created.ResourceVersion {
			t.Fatalf("%d %s: list right after the create at %s: %v", i, dir, created.ResourceVersion, item)
		}
		// Update through the reader, read back through the writer.
		created.Data["round"] = "updated"
		updated, err := gateways[r].cm().Update(ctx, created, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("%d %s: update: %v", i, dir, err)
		}
		got, err = gateways[w].cm().Get(ctx, name, metav1.GetOptions{})
		if err != nil || got.ResourceVersion != updated.ResourceVersion || got.Data["round"] != "updated" {
			t.Fatalf("%d %s: get through the first gateway right after the update at %s: %v %v", i, dir, updated.ResourceVersion, got.GetResourceVersion(), err)
		}
		if item := listed(i, dir, w, name, rvOf(t, updated.ResourceVersion)); item == nil || item.ResourceVersion != updated.ResourceVersion {
			t.Fatalf("%d %s: list through the first gateway right after the update at %s: %v", i, dir, updated.ResourceVersion, item)
		}
		if i%3 != 0 {
			continue
		}
		if err := gateways[w].cm().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("%d %s: delete: %v", i, dir, err)
		}
		if got, err := gateways[r].cm().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("%d %s: get right after the delete: want 404, got %v %v", i, dir, got.GetResourceVersion(), err)
		}
		if item := listed(i, dir, r, name, rvOf(t, updated.ResourceVersion)+1); item != nil {
			t.Fatalf("%d %s: list right after the delete still has %s at %s", i, dir, name, item.ResourceVersion)
		}
	}
	// The end state is the same through both.
	la, err := gateways[0].cm().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lb, err := gateways[1].cm().List(ctx, metav1.ListOptions{ResourceVersion: la.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
	if err != nil {
		t.Fatal(err)
	}
	// The namespace also holds the root CA ConfigMap the controllers publish.
	ours := func(items []corev1.ConfigMap) (out []corev1.ConfigMap) {
		for _, cm := range items {
			if strings.HasPrefix(cm.Name, "cm-") {
				out = append(out, cm)
			}
		}
		return out
	}
	if want := rounds - (rounds+2)/3; len(ours(la.Items)) != want || !equality.Semantic.DeepEqual(la.Items, lb.Items) {
		t.Fatalf("lists at %s: %d items through A, %d through B (want %d of ours, equal)", la.ResourceVersion, len(la.Items), len(lb.Items), want)
	}
}

// Watches opened through both gateways from the same resourceVersion agree event for event
// (types, objects, resourceVersions, order) over a run of concurrent creates, updates and
// deletes through both: the gateways' shared watches (the watch hub) and watches with a label
// selector (a storage watch each), four streams in all.
func TestWatchesOnBothReplicasAgree(t *testing.T) {
	rs := replicas(t)
	rs.logsOnFailure(t, "storage", "gateway")
	ns := rs.namespace(t, "replicas-watch-")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start, err := rs.a.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	type stream struct {
		name string
		w    watch.Interface
	}
	var streams []stream
	for _, g := range []struct {
		name string
		c    *kubernetes.Clientset
	}{{"A", rs.a}, {"B", rs.b}} {
		for _, sel := range []string{"", "replicas=yes"} {
			w, err := g.c.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: start.ResourceVersion, LabelSelector: sel})
			if err != nil {
				t.Fatalf("watch through %s (selector %q): %v", g.name, sel, err)
			}
			defer w.Stop()
			streams = append(streams, stream{fmt.Sprintf("%s selector=%q", g.name, sel), w})
		}
	}
	// Writers: each creates its objects, updates each twice and deletes every other one,
	// alternating the gateways request by request.
	const writers, objects = 8, 12
	var acked sync.Map // writes acknowledged, by writer
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for wr := range writers {
		wg.Go(func() {
			clients := []*kubernetes.Clientset{rs.a, rs.b}
			n := 0
			c := func() *kubernetes.Clientset { n++; return clients[(wr+n)%2] }
			for o := range objects {
				name := fmt.Sprintf("w%d-o%02d", wr, o)
				cm, err := c().CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"replicas": "yes"}}, Data: map[string]string{"v": "0"}}, metav1.CreateOptions{})
				if err != nil {
					errs <- fmt.Errorf("create %s: %w", name, err)
					return
				}
				for v := 1; v <= 2; v++ {
					cm.Data["v"] = strconv.Itoa(v)
					if cm, err = c().CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
						errs <- fmt.Errorf("update %s: %w", name, err)
						return
					}
				}
				writes := 3
				if o%2 == 1 {
					if err := c().CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
						errs <- fmt.Errorf("delete %s: %w", name, err)
						return
					}
					writes++
				}
				prev, _ := acked.LoadOrStore(wr, 0)
				acked.Store(wr, prev.(int)+writes)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	total := 0
	acked.Range(func(_, v any) bool { total += v.(int); return true })
	// The last write: every stream ends with it.
	end, err := rs.b.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "end", Labels: map[string]string{"replicas": "yes"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	total++
	type event struct {
		typ watch.EventType
		cm  *corev1.ConfigMap
	}
	got := make([][]event, len(streams))
	for i, st := range streams {
		for done := false; !done; {
			select {
			case ev, ok := <-st.w.ResultChan():
				if !ok {
					t.Fatalf("%s: the watch ended after %d events", st.name, len(got[i]))
				}
				cm, isCM := ev.Object.(*corev1.ConfigMap)
				if !isCM {
					t.Fatalf("%s: event %d is %s %T: %v", st.name, len(got[i]), ev.Type, ev.Object, ev.Object)
				}
				got[i] = append(got[i], event{ev.Type, cm})
				done = cm.Name == end.Name
			case <-ctx.Done():
				t.Fatalf("%s: %d events and not the last write (%s) yet", st.name, len(got[i]), end.ResourceVersion)
			}
		}
	}
	// Streams 0 and 2 are A and B without a selector, 1 and 3 with it. Without a selector the
	// streams also carry the controllers' root CA ConfigMap of the namespace.
	labelled := func(evs []event) (out []event) {
		for _, ev := range evs {
			if ev.cm.Labels["replicas"] == "yes" {
				out = append(out, ev)
			}
		}
		return out
	}
	first := got[1]
	if n := len(labelled(got[0])); len(first) != total || n != total {
		t.Fatalf("%d acknowledged writes: %s has %d events, %s %d of our objects", total, streams[1].name, len(first), streams[0].name, n)
	}
	for i := range []int{0, 1} {
		prev := rvOf(t, start.ResourceVersion)
		for k, ev := range got[i] {
			rv := rvOf(t, ev.cm.ResourceVersion)
			if rv <= prev {
				t.Fatalf("%s: event %d at %d after %d", streams[i].name, k, rv, prev)
			}
			prev = rv
		}
		if last := got[i][len(got[i])-1]; last.typ != watch.Added || last.cm.ResourceVersion != end.ResourceVersion {
			t.Fatalf("%s: ends with %s at %s, want ADDED at %s", streams[i].name, last.typ, last.cm.ResourceVersion, end.ResourceVersion)
		}
	}
	same := func(x, y int, a, b []event) {
		if len(a) != len(b) {
			t.Fatalf("%s: %d events, %s: %d", streams[x].name, len(a), streams[y].name, len(b))
		}
		for k := range a {
			if a[k].typ != b[k].typ || !equality.Semantic.DeepEqual(a[k].cm, b[k].cm) {
				t.Fatalf("event %d differs: %s: %s %s at %s; %s: %s %s at %s", k,
					streams[x].name, a[k].typ, a[k].cm.Name, a[k].cm.ResourceVersion, streams[y].name, b[k].typ, b[k].cm.Name, b[k].cm.ResourceVersion)
			}
		}
	}
	same(0, 2, got[0], got[2])
	same(1, 3, got[1], got[3])
	same(0, 1, labelled(got[0]), got[1])
	t.Logf("%d streams agree on %d events (%d without the selector; revisions %s..%s) from %d writers through both gateways",
		len(streams), len(first), len(got[0]), first[0].cm.ResourceVersion, end.ResourceVersion, writers)
}

// The controllers' leader Lease and where the tests read it (coordination under Platform's group).
var (
	leaseName = naming.Product + "-controller-manager"
	leasesGVR = schema.GroupVersionResource{Group: naming.Group("coordination.k8s.io"), Version: "v1", Resource: "leases"}
)

// The controllers' leader election timing (the service's defaults).
const (
	leaseDuration = 15 * time.Second
	retryPeriod   = 2 * time.Second
)

// lease is the leader Lease's holder and times.
type lease struct {
	holder          string
	acquire, renew  time.Time
	transitions     int64
	resourceVersion string
}

func readLease(ctx context.Context, dyn dynamic.Interface) (lease, error) {
	u, err := dyn.Resource(leasesGVR).Namespace(naming.SystemNamespace).Get(ctx, leaseName, metav1.GetOptions{})
	if err != nil {
		return lease{}, err
	}
	var l lease
	l.holder, _, _ = unstructuredString(u.Object, "spec", "holderIdentity")
	at := func(field string) time.Time {
		s, _, _ := unstructuredString(u.Object, "spec", field)
		tm, _ := time.Parse(metav1.RFC3339Micro, s)
		return tm
	}
	l.acquire, l.renew = at("acquireTime"), at("renewTime")
	if spec, ok := u.Object["spec"].(map[string]any); ok {
		if n, ok := spec["leaseTransitions"].(int64); ok {
			l.transitions = n
		}
	}
	l.resourceVersion = u.GetResourceVersion()
	return l, nil
}

func unstructuredString(obj map[string]any, path ...string) (string, bool, error) {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false, nil
		}
		cur = m[p]
	}
	s, ok := cur.(string)
	return s, ok, nil
}

// scrape reads a Prometheus text exposition and calls each for every sample line.
func scrape(url string, each func(name, labels string, value float64)) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	for line := range strings.SplitSeq(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		series, value, ok := strings.Cut(line, " ")
		if !ok {
			return fmt.Errorf("%s: %q", url, line)
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return fmt.Errorf("%s: %q: %w", url, line, err)
		}
		name, labels, _ := strings.Cut(series, "{")
		each(name, strings.TrimSuffix(labels, "}"), v)
	}
	return nil
}

// metric is the sum of the samples of family whose labels contain match ("" for all); 0 when
// there are none.
func metric(url, family, match string) (float64, error) {
	var sum float64
	err := scrape(url, func(name, labels string, v float64) {
		if name == family && strings.Contains(labels, match) {
			sum += v
		}
	})
	return sum, err
}

// identity is the leader election identity a controllers process announced last in its log
// ("" if none yet).
func identity(rs *replicaSet, name string) string {
	id := ""
	for line := range strings.SplitSeq(rs.s.Logs(name), "\n") {
		var rec struct {
			Msg      string `json:"msg"`
			Identity string `json:"identity"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "waiting for the leader lease" {
			id = rec.Identity
		}
	}
	return id
}

// Two controllers processes (one on each gateway) run their controllers once: only the holder of
// the leader Lease acts, the other's workers never run (its controller_syncs_total stays 0);
// when the leader stops (SIGTERM: it releases the lease) the other takes over within the lease
// duration and acts; when that one is killed (SIGKILL: nothing is released) the restarted first
// process takes over once the lease has expired: within the lease duration plus two retry
// periods (and a second for the requests) of the last renewal: client-go waits a lease duration
// after the renewal it last saw, and sees renewals and tries to acquire every retry period,
// jittered by up to 20%.
func TestLeaderElectedControllers(t *testing.T) {
	rs := replicas(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	second, err := rs.s.StartControllersReplica(rs.urlB)
	if err != nil {
		t.Fatal(err)
	}
	procs := []string{"controllers", second}
	rs.logsOnFailure(t, append(procs, "gateway")...)
	dyn, err := dynamic.NewForConfig(rs.config(rs.s.URL))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{} // identity -> process
	stack.Eventually(t, 30*time.Second, "both controllers processes to announce their identities", func() error {
		for _, p := range procs {
			id := identity(rs, p)
			if id == "" {
				return fmt.Errorf("%s has not logged its identity", p)
			}
			ids[id] = p
		}
		return nil
	})
	// leaderIs waits until the Lease names one of the running processes and that process, alone
	// among them, reports leader_election_master_status 1; it returns the process and the Lease.
	leaderIs := func(what string, timeout time.Duration, running []string) (string, lease) {
		var leader string
		var l lease
		stack.Eventually(t, timeout, what, func() error {
			var err error
			if l, err = readLease(ctx, dyn); err != nil {
				return err
			}
			p, ok := ids[l.holder]
			if !ok || !slices.Contains(running, p) {
				return fmt.Errorf("the lease is held by %q (%s), not by a running process of %v", l.holder, p, running)
			}
			for _, q := range running {
				status, err := metric(rs.s.MetricsURLs[q], "leader_election_master_status", fmt.Sprintf("name=%q", leaseName))
				if err != nil {
					return err
				}
				if (q == p) != (status == 1) {
					return fmt.Errorf("the lease names %s; %s reports leader_election_master_status %v", p, q, status)
				}
			}
			leader = p
			return nil
		})
		return leader, l
	}
	// syncs is what process p's controllers synced (match: "" all, or `controller="<name>"`).
	syncs := func(p, match string) float64 {
		t.Helper()
		n, err := metric(rs.s.MetricsURLs[p], "controller_syncs_total", match)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// defaultServiceAccount creates a namespace through gw and waits until its default
	// ServiceAccount exists, which only a leading controllers process creates.
	defaultServiceAccount := func(gw *kubernetes.Clientset) {
		t.Helper()
		ns, err := gw.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "replicas-sa-"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rs.a.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{}) })
		stack.Eventually(t, 20*time.Second, "the default ServiceAccount of "+ns.Name, func() error {
			list, err := gw.CoreV1().ServiceAccounts(ns.Name).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			if len(list.Items) != 1 || list.Items[0].Name != "default" {
				return fmt.Errorf("service accounts: %v", list.Items)
			}
			return nil
		})
	}

	leader, l := leaderIs("one leader among both processes", leaseDuration+10*time.Second, procs)
	standby := procs[0]
	if leader == procs[0] {
		standby = procs[1]
	}
	t.Logf("leader %s (%s), standby %s", leader, l.holder, standby)
	defaultServiceAccount(rs.b)
	if n := syncs(standby, ""); n != 0 {
		t.Fatalf("the standby %s synced %v keys", standby, n)
	}
	if n := syncs(leader, `controller="serviceaccount"`); n == 0 {
		t.Fatalf("the leader %s has synced no service accounts", leader)
	}

	// A graceful stop releases the lease: the standby takes it at its next try.
	stopped := time.Now()
	if err := rs.s.StopService(leader, false); err != nil {
		t.Fatal(err)
	}
	newLeader, l2 := leaderIs("the standby to take over", leaseDuration, []string{standby})
	took := time.Since(stopped)
	if newLeader != standby || took > leaseDuration {
		t.Fatalf("after stopping %s: leader %s after %v", leader, newLeader, took)
	}
	t.Logf("%s took over %v after %s stopped (lease transitions %d -> %d)", standby, took.Round(time.Millisecond), leader, l.transitions, l2.transitions)
	defaultServiceAccount(rs.a)
	if n := syncs(standby, `controller="serviceaccount"`); n == 0 {
		t.Fatalf("the new leader %s has synced no service accounts", standby)
	}

	// Restart the first leader (a standby now, with a new identity), then kill the current one.
	if err := rs.s.StartService(leader); err != nil {
		t.Fatal(err)
	}
	old := identity(rs, leader)
	stack.Eventually(t, 30*time.Second, leader+" to announce its new identity", func() error {
		id := identity(rs, leader)
		if id == "" || ids[id] != "" {
			return fmt.Errorf("%s has not logged a new identity (last %q)", leader, id)
		}
		ids[id] = leader
		return nil
	})
	delete(ids, old)
	// The restarted process is running its informers and waiting: it must not lead, nor act.
	if cur, _ := leaderIs("the lease to stay with "+standby, 10*time.Second, []string{standby, leader}); cur != standby {
		t.Fatalf("the restarted %s took the lease from %s", leader, standby)
	}
	if n := syncs(leader, ""); n != 0 {
		t.Fatalf("the restarted %s synced %v keys as a standby", leader, n)
	}
	before, err := readLease(ctx, dyn)
	if err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := rs.s.StopService(standby, true); err != nil {
		t.Fatal(err)
	}
	// The last renewal is the one the Lease showed after the kill.
	lastRenew, err := readLease(ctx, dyn)
	if err != nil {
		t.Fatal(err)
	}
	if lastRenew.holder != before.holder || lastRenew.renew.Before(before.renew) {
		t.Fatalf("the lease changed hands or went back at the kill: %+v, then %+v", before, lastRenew)
	}
	final, l3 := leaderIs("the restarted process to take over from the killed leader", leaseDuration+2*retryPeriod+30*time.Second, []string{leader})
	if final != leader {
		t.Fatalf("after killing %s the lease went to %s", standby, final)
	}
	// Plus a second for the requests of the tries themselves.
	bound := leaseDuration + 2*retryPeriod*12/10 + time.Second
	gap := l3.acquire.Sub(lastRenew.renew)
	t.Logf("%s took over %v after the kill, %v after the last renewal (bound %v)", leader, time.Since(killed).Round(time.Millisecond), gap.Round(time.Millisecond), bound)
	if gap < leaseDuration || gap > bound {
		t.Fatalf("the lease was acquired %v after its last renewal: want between the lease duration %v and %v", gap, leaseDuration, bound)
	}
	defaultServiceAccount(rs.b)
}
