package rbac

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"

	"platform.io/services/authz/authorizer"
)

// benchSnapshot is a cluster of the brief's size times scale: 500*scale Roles (10 per
// namespace), 1,000*scale RoleBindings (20 per namespace, each binding one Role to one user and
// one group) and 100*scale ClusterRoleBindings (to users, groups and service accounts, using
// ClusterRoles shaped like the default ones). Every user holds the same few bindings whatever
// the scale, as in a real cluster where more bindings mean more users, not more per user.
func benchSnapshot(scale int) Snapshot {
	var s Snapshot
	s.ClusterRoles = []*rbacv1.ClusterRole{
		clusterRole("view",
			rule(l("get", "list", "watch"), l(""), l("pods", "pods/log", "pods/status", "services", "endpoints", "configmaps", "persistentvolumeclaims", "events", "replicationcontrollers", "replicationcontrollers/scale")),
			rule(l("get", "list", "watch"), l("apps"), l("deployments", "deployments/scale", "statefulsets", "statefulsets/scale", "daemonsets", "replicasets")),
			rule(l("get", "list", "watch"), l("batch"), l("jobs", "cronjobs"))),
		clusterRole("edit",
			rule(l("create", "delete", "deletecollection", "patch", "update"), l(""), l("pods", "pods/exec", "services", "configmaps", "secrets", "persistentvolumeclaims")),
			rule(l("create", "delete", "deletecollection", "patch", "update"), l("apps"), l("deployments", "deployments/scale", "statefulsets", "daemonsets", "replicasets"))),
		clusterRole("system:discovery", urlRule(l("get"), l("/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/readyz", "/openapi", "/openapi/*", "/version", "/version/"))),
		clusterRole("system:basic-user", rule(l("create"), l("authorization.platform.io"), l("selfsubjectaccessreviews", "selfsubjectrulesreviews"))),
		clusterRole("secret-reader", namedRule(l("get"), l(""), l("secrets"), l("app-token", "db-password"))),
	}
	namespaces := 50 * scale
	for n := range namespaces {
		ns := fmt.Sprintf("ns-%d", n)
		for r := range 10 {
			s.Roles = append(s.Roles, role(ns, fmt.Sprintf("role-%d", r),
				rule(l("get", "list", "watch"), l(""), l("configmaps", fmt.Sprintf("things-%d", r))),
				rule(l("create", "update", "patch"), l("apps"), l("deployments", "deployments/scale")),
				namedRule(l("get", "update"), l(""), l("secrets"), l(fmt.Sprintf("secret-%d", r)))))
		}
		for b := range 20 {
			s.RoleBindings = append(s.RoleBindings, rb(ns, fmt.Sprintf("binding-%d", b), "Role", fmt.Sprintf("role-%d", b%10),
				userSubject(fmt.Sprintf("user-%d-%d", n, b)), groupSubject(fmt.Sprintf("team-%d", n))))
		}
	}
	for i := range 100 * scale {
		var subj rbacv1.Subject
		switch i % 3 {
		case 0:
			subj = userSubject(fmt.Sprintf("operator-%d", i))
		case 1:
			subj = groupSubject(fmt.Sprintf("group-%d", i))
		default:
			subj = saSubject(fmt.Sprintf("ns-%d", i%namespaces), fmt.Sprintf("controller-%d", i))
		}
		roleName := []string{"view", "edit", "secret-reader"}[i%3]
		s.ClusterRoleBindings = append(s.ClusterRoleBindings, crb(fmt.Sprintf("crb-%d", i), "ClusterRole", roleName, subj))
	}
	// The default bindings every authenticated user has.
	s.ClusterRoleBindings = append(s.ClusterRoleBindings,
		crb("system:discovery", "ClusterRole", "system:discovery", groupSubject("system:authenticated")),
		crb("system:basic-user", "ClusterRole", "system:basic-user", groupSubject("system:authenticated")))
	return s
}

// benchRequests are typical requests of a user holding two RoleBindings in ns-7 (directly and
// through its team group) plus the default cluster bindings: allowed by a Role, allowed by a
// named rule, refused, a discovery URL, and a request in a namespace where it has nothing.
func benchRequests() map[string]authorizer.Attributes {
	u := &authorizer.User{Name: "user-7-3", Groups: []string{"team-7", "system:authenticated"}}
	return map[string]authorizer.Attributes{
		"allowed":          res(u, "get", "", "configmaps", "", "ns-7", "settings"),
		"allowed-subres":   res(u, "update", "apps", "deployments", "scale", "ns-7", "web"),
		"allowed-by-name":  res(u, "get", "", "secrets", "", "ns-7", "secret-3"),
		"refused":          res(u, "delete", "", "pods", "", "ns-7", "p"),
		"other-namespace":  res(u, "get", "", "configmaps", "", "ns-8", "settings"),
		"non-resource-url": url(u, "get", "/apis/apps/v1"),
	}
}

// BenchmarkAuthorize measures decisions at the brief's size (1,000 RoleBindings, 500 Roles,
// 100 ClusterRoleBindings) and at ten times that: the cost per decision must stay flat.
func BenchmarkAuthorize(b *testing.B) {
	for _, scale := range []int{1, 10} {
		s := benchSnapshot(scale)
		a := newAuthorizer(b, s)
		for name, at := range benchRequests() {
			want, _, _ := refAllows(s, at)
			b.Run(fmt.Sprintf("bindings=%d/%s", len(s.RoleBindings)+len(s.ClusterRoleBindings), name), func(b *testing.B) {
				ctx := context.Background()
				b.ReportAllocs()
				cpu := processCPU()
				for b.Loop() {
					res, err := a.Authorize(ctx, at)
					if err != nil {
						b.Fatal(err)
					}
					if (res.Decision == authorizer.Allow) != want {
						b.Fatalf("decision %v, reference says allowed=%v", res.Decision, want)
					}
				}
				reportCPU(b, cpu, "decisions")
			})
		}
	}
}

// BenchmarkUpdate measures compiling and installing a snapshot of the brief's size and ten
// times that.
func BenchmarkUpdate(b *testing.B) {
	for _, scale := range []int{1, 10} {
		s := benchSnapshot(scale)
		b.Run(fmt.Sprintf("bindings=%d", len(s.RoleBindings)+len(s.ClusterRoleBindings)), func(b *testing.B) {
			a, err := New(WithLogger(quiet))
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			cpu := processCPU()
			for b.Loop() {
				if err := a.Update(ctx, s); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu, "updates")
		})
	}
}

// processCPU is the CPU time the process has used. With -cpu=1 it is the benchmark's own work
// (garbage collection included): decisions per CPU-second is "per core", and unlike wall time it
// does not drop when other processes share the machine's cores.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU adds the CPU time per operation and the operations per CPU-second to the results.
func reportCPU(b *testing.B, start time.Duration, unit string) {
	used := processCPU() - start
	if used <= 0 || b.N == 0 {
		return
	}
	b.ReportMetric(float64(used.Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(b.N)/used.Seconds(), unit+"/cpu-s")
}
