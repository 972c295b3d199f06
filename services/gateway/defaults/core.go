package defaults

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// pod adds to the pod spec defaults those upstream sets on Pods only (not on pod templates).
func pod(p *corev1.Pod) {
	// Requests default to limits (regular and init containers).
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			r := &cs[i].Resources
			if r.Limits == nil {
				continue
			}
			if r.Requests == nil {
				r.Requests = corev1.ResourceList{}
			}
			for name, q := range r.Limits {
				if _, ok := r.Requests[name]; !ok {
					r.Requests[name] = q.DeepCopy()
				}
			}
		}
	}
	defPtr(&p.Spec.EnableServiceLinks, corev1.DefaultEnableServiceLinks)
	if p.Spec.HostNetwork { // with the host's network, a container port is a host port
		for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
			for i := range cs {
				for j := range cs[i].Ports {
					def(&cs[i].Ports[j].HostPort, cs[i].Ports[j].ContainerPort)
				}
			}
		}
	}
	podSpec(&p.Spec)
}

// podSpec sets the defaults of a pod spec, wherever it appears (pods and every pod template).
func podSpec(s *corev1.PodSpec) {
	def(&s.DNSPolicy, corev1.DNSClusterFirst)
	def(&s.RestartPolicy, corev1.RestartPolicyAlways)
	if s.SecurityContext == nil {
		s.SecurityContext = &corev1.PodSecurityContext{}
	}
	defPtr(&s.TerminationGracePeriodSeconds, corev1.DefaultTerminationGracePeriodSeconds)
	def(&s.SchedulerName, corev1.DefaultSchedulerName)
	for i := range s.Volumes {
		volume(&s.Volumes[i])
	}
	for i := range s.InitContainers {
		container(&s.InitContainers[i])
	}
	for i := range s.Containers {
		container(&s.Containers[i])
	}
	for i := range s.EphemeralContainers {
		container((*corev1.Container)(&s.EphemeralContainers[i].EphemeralContainerCommon))
	}
	roundUp(s.Overhead)
	if s.Resources != nil {
		roundUp(s.Resources.Limits)
		roundUp(s.Resources.Requests)
	}
}

func container(c *corev1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = pullPolicy(c.Image)
	}
	def(&c.TerminationMessagePath, corev1.TerminationMessagePathDefault)
	def(&c.TerminationMessagePolicy, corev1.TerminationMessageReadFile)
	for i := range c.Ports {
		def(&c.Ports[i].Protocol, corev1.ProtocolTCP)
	}
	for i := range c.Env {
		if from := c.Env[i].ValueFrom; from != nil {
			fieldRef(from.FieldRef)
		}
	}
	roundUp(c.Resources.Limits)
	roundUp(c.Resources.Requests)
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		if p == nil {
			continue
		}
		def(&p.TimeoutSeconds, 1)
		def(&p.PeriodSeconds, 10)
		def(&p.SuccessThreshold, 1)
		def(&p.FailureThreshold, 3)
		httpGet(p.HTTPGet)
		if p.GRPC != nil {
			defPtr(&p.GRPC.Service, "")
		}
	}
	if l := c.Lifecycle; l != nil {
		for _, h := range []*corev1.LifecycleHandler{l.PostStart, l.PreStop} {
			if h != nil {
				httpGet(h.HTTPGet)
			}
		}
	}
}

func httpGet(h *corev1.HTTPGetAction) {
	if h != nil {
		def(&h.Path, "/")
		def(&h.Scheme, corev1.URISchemeHTTP)
	}
}

func fieldRef(f *corev1.ObjectFieldSelector) {
	if f != nil {
		def(&f.APIVersion, "v1")
	}
}

func downwardAPIItems(items []corev1.DownwardAPIVolumeFile) {
	for i := range items {
		fieldRef(items[i].FieldRef)
	}
}

func volume(v *corev1.Volume) {
	s := &v.VolumeSource
	if *s == (corev1.VolumeSource{}) { // no source at all is an emptyDir
		s.EmptyDir = &corev1.EmptyDirVolumeSource{}
	}
	if s.HostPath != nil {
		defPtr(&s.HostPath.Type, corev1.HostPathUnset)
	}
	if s.Secret != nil {
		defPtr(&s.Secret.DefaultMode, corev1.SecretVolumeSourceDefaultMode)
	}
	if s.ConfigMap != nil {
		defPtr(&s.ConfigMap.DefaultMode, corev1.ConfigMapVolumeSourceDefaultMode)
	}
	if s.DownwardAPI != nil {
		defPtr(&s.DownwardAPI.DefaultMode, corev1.DownwardAPIVolumeSourceDefaultMode)
		downwardAPIItems(s.DownwardAPI.Items)
	}
	if s.Projected != nil {
		defPtr(&s.Projected.DefaultMode, corev1.ProjectedVolumeSourceDefaultMode)
		for _, src := range s.Projected.Sources {
			if src.DownwardAPI != nil {
				downwardAPIItems(src.DownwardAPI.Items)
			}
			if src.ServiceAccountToken != nil {
				defPtr(&src.ServiceAccountToken.ExpirationSeconds, 3600)
			}
		}
	}
	if s.ISCSI != nil {
		def(&s.ISCSI.ISCSIInterface, "default")
	}
	if r := s.RBD; r != nil {
		def(&r.RBDPool, "rbd")
		def(&r.RadosUser, "admin")
		def(&r.Keyring, "/etc/ceph/keyring")
	}
	azureDisk(s.AzureDisk)
	if s.ScaleIO != nil {
		def(&s.ScaleIO.StorageMode, "ThinProvisioned")
		def(&s.ScaleIO.FSType, "xfs")
	}
	if s.Ephemeral != nil && s.Ephemeral.VolumeClaimTemplate != nil {
		pvcSpec(&s.Ephemeral.VolumeClaimTemplate.Spec)
	}
	if s.Image != nil && s.Image.PullPolicy == "" {
		s.Image.PullPolicy = pullPolicy(s.Image.Reference)
	}
}

func azureDisk(a *corev1.AzureDiskVolumeSource) {
	if a != nil {
		defPtr(&a.CachingMode, corev1.AzureDataDiskCachingReadWrite)
		defPtr(&a.FSType, "ext4")
		defPtr(&a.ReadOnly, false)
		defPtr(&a.Kind, corev1.AzureSharedBlobDisk)
	}
}

func pvcSpec(s *corev1.PersistentVolumeClaimSpec) {
	defPtr(&s.VolumeMode, corev1.PersistentVolumeFilesystem)
	roundUp(s.Resources.Limits)
	roundUp(s.Resources.Requests)
}

func persistentVolume(pv *corev1.PersistentVolume) {
	def(&pv.Spec.PersistentVolumeReclaimPolicy, corev1.PersistentVolumeReclaimRetain)
	defPtr(&pv.Spec.VolumeMode, corev1.PersistentVolumeFilesystem)
	roundUp(pv.Spec.Capacity)
	s := &pv.Spec.PersistentVolumeSource
	if s.HostPath != nil {
		defPtr(&s.HostPath.Type, corev1.HostPathUnset)
	}
	if s.ISCSI != nil {
		def(&s.ISCSI.ISCSIInterface, "default")
	}
	if r := s.RBD; r != nil {
		def(&r.RBDPool, "rbd")
		def(&r.RadosUser, "admin")
		def(&r.Keyring, "/etc/ceph/keyring")
	}
	azureDisk(s.AzureDisk)
	if s.ScaleIO != nil {
		def(&s.ScaleIO.StorageMode, "ThinProvisioned")
		def(&s.ScaleIO.FSType, "xfs")
	}
}

func replicationController(rc *corev1.ReplicationController) {
	if rc.Spec.Template != nil {
		if labels := rc.Spec.Template.Labels; labels != nil {
			if len(rc.Spec.Selector) == 0 {
				rc.Spec.Selector = maps.Clone(labels)
			}
			if len(rc.Labels) == 0 {
				rc.Labels = maps.Clone(labels)
			}
		}
		podSpec(&rc.Spec.Template.Spec)
	}
	defPtr(&rc.Spec.Replicas, 1)
}

func service(svc *corev1.Service) {
	s := &svc.Spec
	def(&s.SessionAffinity, corev1.ServiceAffinityNone)
	switch s.SessionAffinity {
	case corev1.ServiceAffinityNone:
		s.SessionAffinityConfig = nil
	case corev1.ServiceAffinityClientIP:
		if c := s.SessionAffinityConfig; c == nil || c.ClientIP == nil || c.ClientIP.TimeoutSeconds == nil {
			timeout := corev1.DefaultClientIPServiceAffinitySeconds
			s.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: &timeout}}
		}
	}
	def(&s.Type, corev1.ServiceTypeClusterIP)
	for i := range s.Ports {
		p := &s.Ports[i]
		def(&p.Protocol, corev1.ProtocolTCP)
		if p.TargetPort == intstr.FromInt32(0) || p.TargetPort == intstr.FromString("") {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	if s.Type == corev1.ServiceTypeNodePort || s.Type == corev1.ServiceTypeLoadBalancer ||
		(s.Type == corev1.ServiceTypeClusterIP && len(s.ExternalIPs) > 0) { // reachable from outside
		def(&s.ExternalTrafficPolicy, corev1.ServiceExternalTrafficPolicyCluster)
	}
	if s.Type == corev1.ServiceTypeClusterIP || s.Type == corev1.ServiceTypeNodePort || s.Type == corev1.ServiceTypeLoadBalancer {
		defPtr(&s.InternalTrafficPolicy, corev1.ServiceInternalTrafficPolicyCluster)
	}
	if s.Type == corev1.ServiceTypeLoadBalancer {
		defPtr(&s.AllocateLoadBalancerNodePorts, true)
	}
}

func namespace(ns *corev1.Namespace) {
	if ns.Name != "" { // upstream keeps this label equal to the name, whatever the client says
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[corev1.LabelMetadataName] = ns.Name
	}
	def(&ns.Status.Phase, corev1.NamespaceActive)
}

func limitRangeItem(l *corev1.LimitRangeItem) {
	if l.Type == corev1.LimitTypeContainer {
		if l.Default == nil {
			l.Default = corev1.ResourceList{}
		}
		if l.DefaultRequest == nil {
			l.DefaultRequest = corev1.ResourceList{}
		}
		// The default limit falls back to the max; the default request to the default limit,
		// then to the min.
		for _, step := range []struct{ from, to corev1.ResourceList }{{l.Max, l.Default}, {l.Default, l.DefaultRequest}, {l.Min, l.DefaultRequest}} {
			for name, q := range step.from {
				if _, ok := step.to[name]; !ok {
					step.to[name] = q.DeepCopy()
				}
			}
		}
	}
	for _, rl := range []corev1.ResourceList{l.Max, l.Min, l.Default, l.DefaultRequest, l.MaxLimitRequestRatio} {
		roundUp(rl)
	}
}
