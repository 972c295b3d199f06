package printers

import (
	"cmp"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// defaultStorageClassAnnotations mark the default storage class (the beta key is still honoured upstream).
var defaultStorageClassAnnotations = []string{
	"storageclass.kubernetes.io/is-default-class",
	"storageclass.beta.kubernetes.io/is-default-class",
}

func init() {
	// rbac
	register(func(o *rbacv1.Role, _ time.Time) []any {
		return []any{o.Name, createdAt(o.CreationTimestamp)}
	}, nameColumn, createdAtColumn)
	register(func(o *rbacv1.ClusterRole, _ time.Time) []any {
		return []any{o.Name, createdAt(o.CreationTimestamp)}
	}, nameColumn, createdAtColumn)
	register(func(o *rbacv1.RoleBinding, now time.Time) []any {
		return bindingCells(&o.ObjectMeta, o.RoleRef, o.Subjects, now)
	}, bindingColumns...)
	register(func(o *rbacv1.ClusterRoleBinding, now time.Time) []any {
		return bindingCells(&o.ObjectMeta, o.RoleRef, o.Subjects, now)
	}, bindingColumns...)

	// certificates, coordination
	register(csrCells, nameColumn, ageColumn,
		text("SignerName", "Signer asked to sign the certificate."),
		text("Requestor", "User who made the request."),
		text("RequestedDuration", "Validity period asked for."),
		text("Condition", "Approval and issuance state."))
	register(func(o *coordinationv1.Lease, now time.Time) []any {
		return []any{o.Name, deref(o.Spec.HolderIdentity, ""), age(o.CreationTimestamp, now)}
	}, nameColumn, text("Holder", "Current holder of the lease."), ageColumn)

	// networking
	register(ingressCells, nameColumn,
		text("Class", "Ingress class of the ingress."),
		text("Hosts", "Hosts the rules match."),
		text("Address", "Addresses of the load balancer."),
		text("Ports", "Ports the ingress serves."),
		ageColumn)
	register(ingressClassCells, nameColumn,
		text("Controller", "Controller that implements the class."),
		text("Parameters", "Resource with the class's parameters."),
		ageColumn)
	register(func(o *networkingv1.NetworkPolicy, now time.Time) []any {
		return []any{o.Name, metav1.FormatLabelSelector(&o.Spec.PodSelector), age(o.CreationTimestamp, now)}
	}, nameColumn, text("Pod-Selector", "Pods the policy applies to."), ageColumn)
	register(ipAddressCells, nameColumn, text("ParentRef", "Object the address is allocated to."))
	register(func(o *networkingv1.ServiceCIDR, now time.Time) []any {
		return []any{o.Name, strings.Join(o.Spec.CIDRs, ","), age(o.CreationTimestamp, now)}
	}, nameColumn, text("CIDRs", "Ranges of service cluster IPs."), ageColumn)

	// storage
	register(storageClassCells, nameColumn,
		text("Provisioner", "Volume plugin that provisions volumes."),
		text("ReclaimPolicy", "Reclaim policy of provisioned volumes."),
		text("VolumeBindingMode", "When volumes are bound and provisioned."),
		boolean("AllowVolumeExpansion", "Whether volumes can be expanded."),
		ageColumn)
	register(csiDriverCells, nameColumn,
		boolean("AttachRequired", "Whether volumes need attaching."),
		boolean("PodInfoOnMount", "Whether mounts get pod information."),
		boolean("StorageCapacity", "Whether the driver reports storage capacity."),
		text("TokenRequests", "Audiences of service account tokens passed to the driver."),
		boolean("RequiresRepublish", "Whether volumes are mounted again periodically."),
		text("Modes", "Volume lifecycle modes."),
		ageColumn)
	register(func(o *storagev1.CSINode, now time.Time) []any {
		return []any{o.Name, int64(len(o.Spec.Drivers)), age(o.CreationTimestamp, now)}
	}, nameColumn, integer("Drivers", "Number of CSI drivers on the node."), ageColumn)
	register(func(o *storagev1.CSIStorageCapacity, _ time.Time) []any {
		capacity := "<unset>"
		if o.Capacity != nil {
			capacity = o.Capacity.String()
		}
		return []any{o.Name, o.StorageClassName, capacity}
	}, nameColumn,
		text("StorageClassName", "Storage class the capacity is for."),
		text("Capacity", "Available capacity."))
	register(func(o *storagev1.VolumeAttachment, now time.Time) []any {
		return []any{o.Name, o.Spec.Attacher, deref(o.Spec.Source.PersistentVolumeName, ""), o.Spec.NodeName,
			o.Status.Attached, age(o.CreationTimestamp, now)}
	}, nameColumn,
		text("Attacher", "Driver that attaches the volume."),
		text("PV", "Persistent volume attached."),
		text("Node", "Node the volume is attached to."),
		boolean("Attached", "Whether the volume is attached."),
		ageColumn)

	// scheduling, node, discovery
	register(func(o *schedulingv1.PriorityClass, now time.Time) []any {
		return []any{o.Name, int64(o.Value), o.GlobalDefault, age(o.CreationTimestamp, now),
			string(deref(o.PreemptionPolicy, ""))}
	}, nameColumn,
		integer("Value", "Priority of the class's pods."),
		boolean("Global-Default", "Whether pods without a class get this one."),
		ageColumn,
		text("PreemptionPolicy", "Whether the class's pods preempt others."))
	register(func(o *nodev1.RuntimeClass, now time.Time) []any {
		return []any{o.Name, o.Handler, age(o.CreationTimestamp, now)}
	}, nameColumn, text("Handler", "Container runtime handler."), ageColumn)
	register(endpointSliceCells, nameColumn,
		text("AddressType", "Type of the addresses."),
		text("Ports", "Ports of the endpoints."),
		text("Endpoints", "Addresses of the endpoints."),
		ageColumn)

	// admissionregistration
	register(func(o *admissionregistrationv1.MutatingWebhookConfiguration, now time.Time) []any {
		return []any{o.Name, int64(len(o.Webhooks)), age(o.CreationTimestamp, now)}
	}, nameColumn, webhooksColumn, ageColumn)
	register(func(o *admissionregistrationv1.ValidatingWebhookConfiguration, now time.Time) []any {
		return []any{o.Name, int64(len(o.Webhooks)), age(o.CreationTimestamp, now)}
	}, nameColumn, webhooksColumn, ageColumn)

	// flowcontrol
	register(flowSchemaCells, nameColumn,
		text("PriorityLevel", "Priority level of matching requests."),
		integer("MatchingPrecedence", "Lower values are matched first."),
		text("DistinguisherMethod", "How matching requests are divided into flows."),
		ageColumn,
		text("MissingPL", "Whether the priority level does not exist."))
	register(priorityLevelCells, nameColumn,
		text("Type", "Exempt or Limited."),
		text("NominalConcurrencyShares", "Share of the server's concurrency."),
		text("Queues", "Number of queues."),
		text("HandSize", "Queues a flow is shuffle-sharded to."),
		text("QueueLengthLimit", "Requests a queue may hold."),
		ageColumn)
}

var webhooksColumn = integer("Webhooks", "Number of webhooks.")

// bindingColumns are the columns of RoleBinding and ClusterRoleBinding.
var bindingColumns = []metav1.TableColumnDefinition{
	nameColumn,
	text("Role", "Role the binding grants, as kind/name."),
	ageColumn,
	wide(text("Users", "Users bound.")),
	wide(text("Groups", "Groups bound.")),
	wide(text("ServiceAccounts", "Service accounts bound, as namespace/name.")),
}

func bindingCells(m *metav1.ObjectMeta, ref rbacv1.RoleRef, subjects []rbacv1.Subject, now time.Time) []any {
	var users, groups, serviceAccounts []string
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			users = append(users, s.Name)
		case rbacv1.GroupKind:
			groups = append(groups, s.Name)
		case rbacv1.ServiceAccountKind:
			name := s.Name
			if s.Namespace != "" {
				name = s.Namespace + "/" + s.Name
			}
			serviceAccounts = append(serviceAccounts, name)
		}
	}
	return []any{m.Name, ref.Kind + "/" + ref.Name, age(m.CreationTimestamp, now),
		strings.Join(users, ", "), strings.Join(groups, ", "), strings.Join(serviceAccounts, ", ")}
}

func csrCells(o *certificatesv1.CertificateSigningRequest, now time.Time) []any {
	requested := "<none>"
	if s := o.Spec.ExpirationSeconds; s != nil {
		requested = duration.HumanDuration(time.Duration(*s) * time.Second)
	}
	return []any{o.Name, age(o.CreationTimestamp, now), orNone(o.Spec.SignerName), o.Spec.Username, requested, csrCondition(o)}
}

// csrCondition is "Pending", "Approved" or "Denied", then ",Failed" and ",Issued" as they apply.
func csrCondition(o *certificatesv1.CertificateSigningRequest) string {
	has := map[certificatesv1.RequestConditionType]bool{}
	for _, c := range o.Status.Conditions {
		has[c.Type] = true
	}
	status := "Pending"
	if has[certificatesv1.CertificateDenied] {
		status = "Denied"
	} else if has[certificatesv1.CertificateApproved] {
		status = "Approved"
	}
	if has[certificatesv1.CertificateFailed] {
		status += ",Failed"
	}
	if len(o.Status.Certificate) > 0 {
		status += ",Issued"
	}
	return status
}

func ingressCells(o *networkingv1.Ingress, now time.Time) []any {
	var hosts []string
	for _, r := range o.Spec.Rules {
		if r.Host != "" {
			hosts = append(hosts, r.Host)
		}
	}
	var addrs []string
	for _, in := range o.Status.LoadBalancer.Ingress {
		addrs = appendAddress(addrs, in.IP, in.Hostname)
	}
	ports := "80"
	if len(o.Spec.TLS) > 0 {
		ports = "80, 443"
	}
	return []any{o.Name, deref(o.Spec.IngressClassName, "<none>"), cmp.Or(joinMax(hosts, 3, ","), "*"), strings.Join(addrs, ","), ports,
		age(o.CreationTimestamp, now)}
}

func ingressClassCells(o *networkingv1.IngressClass, now time.Time) []any {
	params := "<none>"
	if p := o.Spec.Parameters; p != nil {
		params = p.Kind
		if p.APIGroup != nil {
			params += "." + *p.APIGroup
		}
		params += "/" + p.Name
	}
	return []any{o.Name, o.Spec.Controller, params, age(o.CreationTimestamp, now)}
}

// ipAddressCells names the address's parent as resource.group/namespace/name.
func ipAddressCells(o *networkingv1.IPAddress, _ time.Time) []any {
	parent := "<none>"
	if p := o.Spec.ParentRef; p != nil {
		parts := []string{p.Resource}
		if p.Group != "" {
			parts[0] += "." + p.Group
		}
		if p.Namespace != "" {
			parts = append(parts, p.Namespace)
		}
		parent = strings.ToLower(strings.Join(append(parts, p.Name), "/"))
	}
	return []any{o.Name, parent}
}

func storageClassCells(o *storagev1.StorageClass, now time.Time) []any {
	name := o.Name
	for _, a := range defaultStorageClassAnnotations {
		if o.Annotations[a] == "true" {
			name += " (default)"
			break
		}
	}
	return []any{name, o.Provisioner,
		string(deref(o.ReclaimPolicy, "Delete")),
		string(deref(o.VolumeBindingMode, storagev1.VolumeBindingImmediate)),
		deref(o.AllowVolumeExpansion, false), age(o.CreationTimestamp, now)}
}

func csiDriverCells(o *storagev1.CSIDriver, now time.Time) []any {
	tokens := "<unset>"
	if o.Spec.TokenRequests != nil {
		audiences := make([]string, len(o.Spec.TokenRequests))
		for i, t := range o.Spec.TokenRequests {
			audiences[i] = t.Audience
		}
		tokens = strings.Join(audiences, ",")
	}
	modes := make([]string, len(o.Spec.VolumeLifecycleModes))
	for i, m := range o.Spec.VolumeLifecycleModes {
		modes[i] = string(m)
	}
	return []any{o.Name, deref(o.Spec.AttachRequired, true), deref(o.Spec.PodInfoOnMount, false),
		deref(o.Spec.StorageCapacity, false), tokens, deref(o.Spec.RequiresRepublish, false),
		orNone(strings.Join(modes, ",")), age(o.CreationTimestamp, now)}
}

// endpointSliceCells lists up to three ports (number, else name, else "*") and addresses.
func endpointSliceCells(o *discoveryv1.EndpointSlice, now time.Time) []any {
	ports := make([]string, len(o.Ports))
	for i, p := range o.Ports {
		switch {
		case p.Port != nil:
			ports[i] = strconv.Itoa(int(*p.Port))
		case p.Name != nil:
			ports[i] = *p.Name
		default:
			ports[i] = "*"
		}
	}
	var addrs []string
	for _, e := range o.Endpoints {
		addrs = append(addrs, e.Addresses...)
	}
	return []any{o.Name, string(o.AddressType), cmp.Or(joinMax(ports, 3, ","), "<unset>"), cmp.Or(joinMax(addrs, 3, ","), "<unset>"),
		age(o.CreationTimestamp, now)}
}

func flowSchemaCells(o *flowcontrolv1.FlowSchema, now time.Time) []any {
	method := "<none>"
	if o.Spec.DistinguisherMethod != nil {
		method = string(o.Spec.DistinguisherMethod.Type)
	}
	missing := "?"
	for _, c := range o.Status.Conditions {
		if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
			missing = string(c.Status)
		}
	}
	return []any{o.Name, o.Spec.PriorityLevelConfiguration.Name, int64(o.Spec.MatchingPrecedence), method,
		age(o.CreationTimestamp, now), missing}
}

func priorityLevelCells(o *flowcontrolv1.PriorityLevelConfiguration, now time.Time) []any {
	shares, queues, handSize, queueLength := "<none>", "<none>", "<none>", "<none>"
	if l := o.Spec.Limited; l != nil {
		if l.NominalConcurrencyShares != nil {
			shares = strconv.Itoa(int(*l.NominalConcurrencyShares))
		}
		if q := l.LimitResponse.Queuing; q != nil {
			queues, handSize, queueLength = strconv.Itoa(int(q.Queues)), strconv.Itoa(int(q.HandSize)), strconv.Itoa(int(q.QueueLengthLimit))
		}
	}
	return []any{o.Name, string(o.Spec.Type), shares, queues, handSize, queueLength, age(o.CreationTimestamp, now)}
}
