package printers

import (
	"cmp"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"platform.io/libs/naming"
)

// Node role labels: "<prefix><role>" with any value gives a node that role.
var nodeRolePrefix = "node-role." + naming.Domain + "/"

const (
	upstreamNodeRolePrefix = "node-role.kubernetes.io/"
	// legacyNodeRoleLabel carries a role as its value.
	legacyNodeRoleLabel = "kubernetes.io/role"
)

func init() {
	register(podCells, nameColumn,
		text("Ready", "Ready containers out of all containers."),
		text("Status", "Aggregate status of the pod's containers."),
		integer("Restarts", "Restarts of the pod's containers."),
		ageColumn,
		wide(text("IP", "IP address of the pod.")),
		wide(text("Node", "Node the pod runs on.")),
		wide(text("Nominated Node", "Node the pod is to preempt others on.")),
		wide(text("Readiness Gates", "Readiness gates that pass out of all.")))
	register(podTemplateCells, nameColumn,
		text("Containers", "Names of the containers in the template."),
		text("Images", "Images of the containers in the template."),
		text("Pod Labels", "Labels of the template's pods."))
	register(func(o *corev1.Namespace, now time.Time) []any {
		return []any{o.Name, namespaceStatus(o), age(o.CreationTimestamp, now)}
	}, nameColumn, text("Status", "Phase of the namespace."), ageColumn)
	register(func(o *corev1.ConfigMap, now time.Time) []any {
		return []any{o.Name, int64(len(o.Data) + len(o.BinaryData)), age(o.CreationTimestamp, now)}
	}, nameColumn, integer("Data", "Number of data and binaryData keys."), ageColumn)
	register(func(o *corev1.Secret, now time.Time) []any {
		return []any{o.Name, string(o.Type), secretKeys(o), age(o.CreationTimestamp, now)}
	}, nameColumn, text("Type", "Type of the secret."), integer("Data", "Number of data keys."), ageColumn)
	register(serviceCells, nameColumn,
		text("Type", "How the service is exposed."),
		text("Cluster-IP", "Cluster IP address of the service."),
		text("External-IP", "External addresses of the service."),
		text("Port(s)", "Ports of the service: port[:nodePort]/protocol."),
		ageColumn,
		wide(text("Selector", "Label selector of the service's pods.")))
	register(func(o *corev1.Endpoints, now time.Time) []any {
		return []any{o.Name, endpointAddresses(o), age(o.CreationTimestamp, now)}
	}, nameColumn, text("Endpoints", "Addresses and ports of the endpoints."), ageColumn)
	register(nodeCells, nameColumn,
		text("Status", "Readiness and schedulability of the node."),
		text("Roles", "Roles of the node, from its node-role labels."),
		ageColumn,
		text("Version", "Kubelet version of the node."),
		wide(text("Internal-IP", "Internal IP address of the node.")),
		wide(text("External-IP", "External IP address of the node.")),
		wide(text("OS-Image", "Operating system image of the node.")),
		wide(text("Kernel-Version", "Kernel version of the node.")),
		wide(text("Container-Runtime", "Container runtime of the node.")))
	register(func(o *corev1.ServiceAccount, now time.Time) []any {
		return []any{o.Name, int64(len(o.Secrets)), age(o.CreationTimestamp, now)}
	}, nameColumn, integer("Secrets", "Number of secrets of the service account."), ageColumn)
	register(coreEventCells, eventColumns...)
	register(eventsEventCells, eventColumns...)
	register(persistentVolumeCells, nameColumn,
		text("Capacity", "Storage capacity of the volume."),
		text("Access Modes", "Access modes of the volume."),
		text("Reclaim Policy", "What happens to the volume when released."),
		text("Status", "Phase of the volume."),
		text("Claim", "Claim bound to the volume."),
		text("StorageClass", "Storage class of the volume."),
		text("VolumeAttributesClass", "Volume attributes class of the volume."),
		text("Reason", "Reason for the volume's phase."),
		ageColumn,
		wide(text("VolumeMode", "Filesystem or Block.")))
	register(persistentVolumeClaimCells, nameColumn,
		text("Status", "Phase of the claim."),
		text("Volume", "Volume bound to the claim."),
		text("Capacity", "Storage capacity of the bound volume."),
		text("Access Modes", "Access modes of the bound volume."),
		text("StorageClass", "Storage class of the claim."),
		text("VolumeAttributesClass", "Volume attributes class of the claim."),
		ageColumn,
		wide(text("VolumeMode", "Filesystem or Block.")))
	register(replicationControllerCells, nameColumn,
		integer("Desired", "Desired number of pods."),
		integer("Current", "Number of pods."),
		integer("Ready", "Number of ready pods."),
		ageColumn, containersColumn, imagesColumn, selectorColumn)
	register(resourceQuotaCells, nameColumn, ageColumn,
		text("Request", "Used and hard quota of requests and object counts."),
		text("Limit", "Used and hard quota of limits."))
	register(func(o *corev1.LimitRange, _ time.Time) []any {
		return []any{o.Name, createdAt(o.CreationTimestamp)}
	}, nameColumn, createdAtColumn)
}

// containerCells lists the names and the images of containers, comma-separated.
func containerCells(containers []corev1.Container) (names, images string) {
	n := make([]string, len(containers))
	i := make([]string, len(containers))
	for k, c := range containers {
		n[k], i[k] = c.Name, c.Image
	}
	return strings.Join(n, ","), strings.Join(i, ",")
}

func podCells(p *corev1.Pod, now time.Time) []any {
	s := summarizePod(p)
	ip := p.Status.PodIP
	if len(p.Status.PodIPs) > 0 {
		ip = p.Status.PodIPs[0].IP
	}
	gates := "<none>"
	if n := len(p.Spec.ReadinessGates); n > 0 {
		passed := 0
		for _, g := range p.Spec.ReadinessGates {
			if podConditionTrue(p, g.ConditionType) {
				passed++
			}
		}
		gates = fmt.Sprintf("%d/%d", passed, n)
	}
	return []any{p.Name, fmt.Sprintf("%d/%d", s.ready, s.total), s.status, s.restarts, age(p.CreationTimestamp, now),
		orNone(ip), orNone(p.Spec.NodeName), orNone(p.Status.NominatedNodeName), gates}
}

// podSummary is what kubectl's pod columns say about a pod's containers.
type podSummary struct {
	ready, total int
	restarts     int64
	status       string
}

// summarizePod works out a pod's READY, STATUS and RESTARTS the way kubectl shows them: the phase
// (or the pod's reason) unless an init container is still running or failed ("Init:1/2",
// "Init:CrashLoopBackOff") or a container is waiting or terminated ("CrashLoopBackOff",
// "Completed", "ExitCode:1"), and "Terminating" once the pod is being deleted. Sidecars
// (init containers that restart always) count as containers once started.
func summarizePod(p *corev1.Pod) podSummary {
	s := podSummary{total: len(p.Spec.Containers), status: string(p.Status.Phase)}
	if p.Status.Reason != "" {
		s.status = p.Status.Reason
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonSchedulingGated {
			s.status = corev1.PodReasonSchedulingGated
		}
	}
	sidecars := map[string]bool{}
	for _, c := range p.Spec.InitContainers {
		if deref(c.RestartPolicy, "") == corev1.ContainerRestartPolicyAlways {
			sidecars[c.Name] = true
			s.total++
		}
	}

	var initRestarts, sidecarRestarts int64
	initializing := false
	for i, c := range p.Status.InitContainerStatuses {
		initRestarts += int64(c.RestartCount)
		if sidecars[c.Name] {
			sidecarRestarts += int64(c.RestartCount)
		}
		if initializing {
			continue
		}
		switch {
		case c.State.Terminated != nil && c.State.Terminated.ExitCode == 0:
		case sidecars[c.Name] && deref(c.Started, false):
			if c.Ready {
				s.ready++
			}
		case c.State.Terminated != nil:
			s.status, initializing = "Init:"+terminatedReason(c.State.Terminated), true
		case c.State.Waiting != nil && c.State.Waiting.Reason != "" && c.State.Waiting.Reason != "PodInitializing":
			s.status, initializing = "Init:"+c.State.Waiting.Reason, true
		default:
			s.status, initializing = fmt.Sprintf("Init:%d/%d", i, len(p.Spec.InitContainers)), true
		}
	}

	if initializing && !podConditionTrue(p, corev1.PodInitialized) {
		s.restarts = initRestarts
	} else {
		s.restarts = sidecarRestarts
		running := false
		// Backwards, so that the first container with something to say has the last word.
		for _, c := range slices.Backward(p.Status.ContainerStatuses) {
			s.restarts += int64(c.RestartCount)
			switch {
			case c.State.Waiting != nil && c.State.Waiting.Reason != "":
				s.status = c.State.Waiting.Reason
			case c.State.Terminated != nil:
				s.status = terminatedReason(c.State.Terminated)
			case c.Ready && c.State.Running != nil:
				running = true
				s.ready++
			}
		}
		// A pod whose last container completed while others still run is not "Completed".
		if s.status == "Completed" && running {
			s.status = "NotReady"
			if podConditionTrue(p, corev1.PodReady) {
				s.status = "Running"
			}
		}
	}

	if p.DeletionTimestamp != nil {
		if p.Status.Reason == "NodeLost" {
			s.status = "Unknown"
		} else if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			s.status = "Terminating"
		}
	}
	return s
}

// terminatedReason is a terminated container's reason, or its signal or exit code when it has none.
func terminatedReason(t *corev1.ContainerStateTerminated) string {
	switch {
	case t.Reason != "":
		return t.Reason
	case t.Signal != 0:
		return fmt.Sprintf("Signal:%d", t.Signal)
	default:
		return fmt.Sprintf("ExitCode:%d", t.ExitCode)
	}
}

func podConditionTrue(p *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podTemplateCells(o *corev1.PodTemplate, _ time.Time) []any {
	names, images := containerCells(o.Template.Spec.Containers)
	return []any{o.Name, names, images, labels.FormatLabels(o.Template.Labels)}
}

// namespaceStatus is the namespace's phase; the gateway does not always set one, so an unset
// phase reads as what it means: Active, or Terminating once deletion started.
func namespaceStatus(o *corev1.Namespace) string {
	switch {
	case o.Status.Phase != "":
		return string(o.Status.Phase)
	case o.DeletionTimestamp != nil:
		return string(corev1.NamespaceTerminating)
	default:
		return string(corev1.NamespaceActive)
	}
}

// secretKeys counts a secret's keys, including stringData keys the server has not merged into data.
func secretKeys(o *corev1.Secret) int64 {
	n := len(o.Data)
	for k := range o.StringData {
		if _, dup := o.Data[k]; !dup {
			n++
		}
	}
	return int64(n)
}

func serviceCells(o *corev1.Service, now time.Time) []any {
	typ := cmp.Or(o.Spec.Type, corev1.ServiceTypeClusterIP)
	clusterIP := o.Spec.ClusterIP
	if len(o.Spec.ClusterIPs) > 0 {
		clusterIP = o.Spec.ClusterIPs[0]
	}
	ports := make([]string, len(o.Spec.Ports))
	for i, p := range o.Spec.Ports {
		protocol := cmp.Or(p.Protocol, corev1.ProtocolTCP)
		ports[i] = fmt.Sprintf("%d/%s", p.Port, protocol)
		if p.NodePort != 0 {
			ports[i] = fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, protocol)
		}
	}
	return []any{o.Name, string(typ), orNone(clusterIP), serviceExternalIP(o, typ), orNone(strings.Join(ports, ",")),
		age(o.CreationTimestamp, now), labels.FormatLabels(o.Spec.Selector)}
}

// serviceExternalIP is what kubectl shows as EXTERNAL-IP: the external name, the load balancer's
// addresses ("<pending>" until it has some) or the external IPs.
func serviceExternalIP(o *corev1.Service, typ corev1.ServiceType) string {
	switch typ {
	case corev1.ServiceTypeExternalName:
		return o.Spec.ExternalName
	case corev1.ServiceTypeLoadBalancer:
		var addrs []string
		for _, in := range o.Status.LoadBalancer.Ingress {
			addrs = appendAddress(addrs, in.IP, in.Hostname)
		}
		addrs = append(addrs, o.Spec.ExternalIPs...)
		if len(addrs) == 0 {
			return "<pending>"
		}
		return strings.Join(addrs, ",")
	default:
		return orNone(strings.Join(o.Spec.ExternalIPs, ","))
	}
}

// appendAddress adds a load balancer ingress point's IP, or else its hostname, unless listed already.
func appendAddress(addrs []string, ip, hostname string) []string {
	a := ip
	if a == "" {
		a = hostname
	}
	if a == "" || slices.Contains(addrs, a) {
		return addrs
	}
	return append(addrs, a)
}

// endpointAddresses lists up to three ip:port pairs of all subsets ("<none>" when empty).
func endpointAddresses(o *corev1.Endpoints) string {
	var all []string
	for _, ss := range o.Subsets {
		if len(ss.Ports) == 0 {
			for _, a := range ss.Addresses {
				all = append(all, a.IP)
			}
		}
		for _, p := range ss.Ports {
			for _, a := range ss.Addresses {
				all = append(all, net.JoinHostPort(a.IP, strconv.Itoa(int(p.Port))))
			}
		}
	}
	return orNone(joinMax(all, 3, ","))
}

func nodeCells(o *corev1.Node, now time.Time) []any {
	status := "Unknown"
	for _, c := range o.Status.Conditions {
		if c.Type == corev1.NodeReady {
			status = "NotReady"
			if c.Status == corev1.ConditionTrue {
				status = "Ready"
			}
		}
	}
	if o.Spec.Unschedulable {
		status += ",SchedulingDisabled"
	}
	info := o.Status.NodeInfo
	return []any{o.Name, status, orNone(strings.Join(nodeRoles(o), ",")), age(o.CreationTimestamp, now),
		info.KubeletVersion, nodeAddress(o, corev1.NodeInternalIP), nodeAddress(o, corev1.NodeExternalIP),
		cmp.Or(info.OSImage, "<unknown>"), cmp.Or(info.KernelVersion, "<unknown>"),
		cmp.Or(info.ContainerRuntimeVersion, "<unknown>")}
}

// nodeRoles are the sorted roles named by a node's node-role labels (Platform's or upstream's
// "<prefix><role>" keys, or the legacy kubernetes.io/role value).
func nodeRoles(o *corev1.Node) []string {
	var roles []string
	for k, v := range o.Labels {
		var role string
		switch {
		case strings.HasPrefix(k, nodeRolePrefix):
			role = k[len(nodeRolePrefix):]
		case strings.HasPrefix(k, upstreamNodeRolePrefix):
			role = k[len(upstreamNodeRolePrefix):]
		case k == legacyNodeRoleLabel:
			role = v
		}
		if role != "" && !slices.Contains(roles, role) {
			roles = append(roles, role)
		}
	}
	sort.Strings(roles)
	return roles
}

// nodeAddress is the node's first address of type t, or "<none>".
func nodeAddress(o *corev1.Node, t corev1.NodeAddressType) string {
	for _, a := range o.Status.Addresses {
		if a.Type == t {
			return a.Address
		}
	}
	return "<none>"
}

// eventColumns are the columns of both event kinds (core/v1 and events/v1): kubectl shows the name
// only with -o wide.
var eventColumns = []metav1.TableColumnDefinition{
	wide(nameColumn),
	text("Last Seen", "Time since the event was last observed."),
	text("Type", "Normal or Warning."),
	text("Reason", "Why the event happened, in one word."),
	text("Object", "The object the event is about."),
	wide(text("Subobject", "The part of the object the event is about.")),
	wide(text("Source", "The component that reported the event.")),
	text("Message", "What happened."),
	wide(text("First Seen", "Time since the event was first observed.")),
	wide(integer("Count", "How often the event was observed.")),
}

// event is what the two event kinds have in common, as printed.
type event struct {
	name, typ, reason, message string
	regarding                  corev1.ObjectReference
	component, host            string
	first, last                time.Time
	count                      int64
}

func (e event) cells(now time.Time) []any {
	if e.last.IsZero() {
		e.last = e.first
	}
	if e.count == 0 {
		e.count = 1 // events of the new API report no count when seen once
	}
	object := strings.ToLower(e.regarding.Kind)
	if e.regarding.Name != "" {
		object += "/" + e.regarding.Name
	}
	source := e.component
	if e.host != "" {
		source += ", " + e.host
	}
	return []any{e.name, since(e.last, now), e.typ, e.reason, object, e.regarding.FieldPath, source,
		strings.TrimSpace(e.message), since(e.first, now), e.count}
}

func coreEventCells(o *corev1.Event, now time.Time) []any {
	e := event{name: o.Name, typ: o.Type, reason: o.Reason, message: o.Message, regarding: o.InvolvedObject,
		component: cmp.Or(o.Source.Component, o.ReportingController), host: cmp.Or(o.Source.Host, o.ReportingInstance),
		first: o.FirstTimestamp.Time, last: o.LastTimestamp.Time, count: int64(o.Count)}
	if e.first.IsZero() {
		e.first = o.EventTime.Time
	}
	if o.Series != nil {
		e.last, e.count = o.Series.LastObservedTime.Time, int64(o.Series.Count)
	}
	return e.cells(now)
}

func eventsEventCells(o *eventsv1.Event, now time.Time) []any {
	e := event{name: o.Name, typ: o.Type, reason: o.Reason, message: o.Note, regarding: o.Regarding,
		component: cmp.Or(o.DeprecatedSource.Component, o.ReportingController),
		host:      cmp.Or(o.DeprecatedSource.Host, o.ReportingInstance),
		first:     o.DeprecatedFirstTimestamp.Time, last: o.DeprecatedLastTimestamp.Time, count: int64(o.DeprecatedCount)}
	if e.first.IsZero() {
		e.first = o.EventTime.Time
	}
	if o.Series != nil {
		e.last, e.count = o.Series.LastObservedTime.Time, int64(o.Series.Count)
	}
	return e.cells(now)
}

func persistentVolumeCells(o *corev1.PersistentVolume, now time.Time) []any {
	claim := ""
	if r := o.Spec.ClaimRef; r != nil {
		claim = r.Namespace + "/" + r.Name
	}
	phase := string(o.Status.Phase)
	if o.DeletionTimestamp != nil {
		phase = "Terminating"
	}
	class := cmp.Or(o.Spec.StorageClassName, o.Annotations[corev1.BetaStorageClassAnnotation])
	return []any{o.Name, quantity(o.Spec.Capacity), accessModes(o.Spec.AccessModes),
		string(o.Spec.PersistentVolumeReclaimPolicy), phase, claim, class,
		deref(o.Spec.VolumeAttributesClassName, "<unset>"), o.Status.Reason, age(o.CreationTimestamp, now),
		volumeMode(o.Spec.VolumeMode)}
}

func persistentVolumeClaimCells(o *corev1.PersistentVolumeClaim, now time.Time) []any {
	phase := string(o.Status.Phase)
	if o.DeletionTimestamp != nil {
		phase = "Terminating"
	}
	capacity, modes := "", ""
	if o.Spec.VolumeName != "" {
		capacity, modes = quantity(o.Status.Capacity), accessModes(o.Status.AccessModes)
	}
	class := cmp.Or(deref(o.Spec.StorageClassName, ""), o.Annotations[corev1.BetaStorageClassAnnotation])
	return []any{o.Name, phase, o.Spec.VolumeName, capacity, modes, class,
		deref(o.Spec.VolumeAttributesClassName, "<unset>"), age(o.CreationTimestamp, now), volumeMode(o.Spec.VolumeMode)}
}

// quantity is the storage amount in a resource list ("10Gi"), "" when it has none.
func quantity(l corev1.ResourceList) string {
	q, ok := l[corev1.ResourceStorage]
	if !ok {
		return ""
	}
	return q.String()
}

// accessModes abbreviates access modes the way kubectl does: "RWO,ROX,RWX,RWOP".
func accessModes(modes []corev1.PersistentVolumeAccessMode) string {
	var out []string
	for _, m := range []struct {
		mode  corev1.PersistentVolumeAccessMode
		short string
	}{
		{corev1.ReadWriteOnce, "RWO"}, {corev1.ReadOnlyMany, "ROX"},
		{corev1.ReadWriteMany, "RWX"}, {corev1.ReadWriteOncePod, "RWOP"},
	} {
		if slices.Contains(modes, m.mode) {
			out = append(out, m.short)
		}
	}
	return strings.Join(out, ",")
}

func volumeMode(m *corev1.PersistentVolumeMode) string {
	if m == nil {
		return "<unset>"
	}
	return string(*m)
}

func replicationControllerCells(o *corev1.ReplicationController, now time.Time) []any {
	var names, images string
	if o.Spec.Template != nil {
		names, images = containerCells(o.Spec.Template.Spec.Containers)
	}
	return []any{o.Name, int64(deref(o.Spec.Replicas, 1)), int64(o.Status.Replicas), int64(o.Status.ReadyReplicas),
		age(o.CreationTimestamp, now), names, images, labels.FormatLabels(o.Spec.Selector)}
}

// resourceQuotaCells shows "resource: used/hard" for each resource of the quota, sorted, limits
// in their own column.
func resourceQuotaCells(o *corev1.ResourceQuota, now time.Time) []any {
	names := make([]string, 0, len(o.Status.Hard))
	for name := range o.Status.Hard {
		names = append(names, string(name))
	}
	sort.Strings(names)
	var requests, limits []string
	for _, name := range names {
		used, hard := o.Status.Used[corev1.ResourceName(name)], o.Status.Hard[corev1.ResourceName(name)]
		s := fmt.Sprintf("%s: %s/%s", name, used.String(), hard.String())
		if strings.HasPrefix(name, "limits.") {
			limits = append(limits, s)
		} else {
			requests = append(requests, s)
		}
	}
	return []any{o.Name, age(o.CreationTimestamp, now), strings.Join(requests, ", "), strings.Join(limits, ", ")}
}
