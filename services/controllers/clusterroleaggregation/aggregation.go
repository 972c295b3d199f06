// Package clusterroleaggregation is the ClusterRole aggregation controller (upstream's
// "clusterrole-aggregation"): the rules of a ClusterRole with an aggregationRule are the union of
// the rules of every other ClusterRole one of its selectors matches, deduplicated, in a stable
// order (selectors in order, matching roles by name, rules in their order). The rules are written
// only when they differ, with server-side apply under upstream's field manager (an update where
// apply is not served).
package clusterroleaggregation

import (
	"context"
	"log/slog"
	"sort"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	rbacinformers "k8s.io/client-go/informers/rbac/v1"
	rbacv1client "k8s.io/client-go/kubernetes/typed/rbac/v1"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"

	"platform.io/services/controllers/apiclient"
	"platform.io/services/controllers/metrics"
	"platform.io/services/controllers/runner"
)

// Name is the controller's name in --controllers.
const Name = "clusterrole-aggregation"

// FieldManager owns the aggregated rules (upstream's manager name).
const FieldManager = "clusterrole-aggregation-controller"

// Options configure the controller.
type Options struct {
	Metrics *metrics.Metrics
	Log     *slog.Logger
}

// Controller aggregates ClusterRoles.
type Controller struct {
	client rbacv1client.ClusterRolesGetter
	lister rbaclisters.ClusterRoleLister
	synced cache.InformerSynced
	queue  *runner.Queue
	log    *slog.Logger
}

// New builds the controller and registers its event handlers. client must reach Platform's RBAC
// group (apiclient.Clients.RBAC).
func New(client rbacv1client.ClusterRolesGetter, roles rbacinformers.ClusterRoleInformer, opts Options) (*Controller, error) {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	c := &Controller{client: client, lister: roles.Lister(), synced: roles.Informer().HasSynced, log: opts.Log}
	c.queue = runner.New(runner.Options{Controller: Name, Name: "ClusterRoleAggregator", Sync: c.sync, Metrics: opts.Metrics, Log: opts.Log})
	// Any change to any ClusterRole may change what a selector matches or what a matched role
	// grants; the set of aggregated roles is small, so all of them are looked at again (each key
	// retried on its own), as upstream does.
	if _, err := roles.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.enqueueAggregated() },
		UpdateFunc: func(_, _ any) { c.enqueueAggregated() },
		DeleteFunc: func(any) { c.enqueueAggregated() },
	}); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Controller) enqueueAggregated() {
	roles, err := c.lister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, r := range roles {
		if r.AggregationRule != nil {
			c.queue.Add(r.Name)
		}
	}
}

// Run waits for the informer, then works until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		c.queue.ShutDown()
		return
	}
	c.queue.Run(ctx, workers)
}

// AggregatedRules computes the rules of an aggregated ClusterRole from all ClusterRoles.
func AggregatedRules(role *rbacv1.ClusterRole, all []*rbacv1.ClusterRole) ([]rbacv1.PolicyRule, error) {
	rules := []rbacv1.PolicyRule{}
	if role.AggregationRule == nil {
		return rules, nil
	}
	sorted := append([]*rbacv1.ClusterRole(nil), all...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for i := range role.AggregationRule.ClusterRoleSelectors {
		sel, err := metav1.LabelSelectorAsSelector(&role.AggregationRule.ClusterRoleSelectors[i])
		if err != nil {
			return nil, err
		}
		for _, other := range sorted {
			if other.Name == role.Name || !sel.Matches(labels.Set(other.Labels)) {
				continue
			}
			for _, r := range other.Rules {
				if !containsRule(rules, r) {
					rules = append(rules, r)
				}
			}
		}
	}
	return rules, nil
}

func containsRule(rules []rbacv1.PolicyRule, r rbacv1.PolicyRule) bool {
	for _, have := range rules {
		if equality.Semantic.DeepEqual(have, r) {
			return true
		}
	}
	return false
}

func (c *Controller) sync(ctx context.Context, name string) error {
	role, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if role.AggregationRule == nil {
		return nil
	}
	all, err := c.lister.List(labels.Everything())
	if err != nil {
		return err
	}
	rules, err := AggregatedRules(role, all)
	if err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(rules, role.Rules) {
		return nil
	}
	err = c.apply(ctx, name, rules)
	if apierrors.IsUnsupportedMediaType(err) {
		err = c.update(ctx, role, rules)
	}
	if err == nil {
		c.log.Info("aggregated cluster role rules", "clusterRole", name, "rules", len(rules))
	}
	return err
}

// apply writes the rules with server-side apply, forcing ownership of them.
func (c *Controller) apply(ctx context.Context, name string, rules []rbacv1.PolicyRule) error {
	cfg := rbacv1ac.ClusterRole(name).WithAPIVersion(apiclient.RBACGroupVersion.String())
	cfg.Rules = make([]rbacv1ac.PolicyRuleApplyConfiguration, 0, len(rules))
	for _, r := range rules {
		rule := rbacv1ac.PolicyRule().
			WithVerbs(r.Verbs...).WithAPIGroups(r.APIGroups...).WithResources(r.Resources...).
			WithResourceNames(r.ResourceNames...).WithNonResourceURLs(r.NonResourceURLs...)
		cfg.Rules = append(cfg.Rules, *rule)
	}
	_, err := c.client.ClusterRoles().Apply(ctx, cfg, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	return err
}

// update writes the rules with an update (servers without apply).
func (c *Controller) update(ctx context.Context, role *rbacv1.ClusterRole, rules []rbacv1.PolicyRule) error {
	next := role.DeepCopy()
	next.Rules = rules
	_, err := c.client.ClusterRoles().Update(ctx, next, metav1.UpdateOptions{FieldManager: FieldManager})
	return err
}
