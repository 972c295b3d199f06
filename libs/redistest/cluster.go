package redistest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ClusterOptions configure StartCluster.
type ClusterOptions struct {
	// Masters is the number of masters (3 if 0; Redis Cluster needs at least 3).
	Masters int
	// ReplicasPerMaster is the number of replicas of each master (1 if 0; -1 for none).
	ReplicasPerMaster int
	// AppendFsync is every node's appendfsync policy ("everysec" if empty).
	AppendFsync string
	// NodeTimeout is cluster-node-timeout: how long a master may be unreachable before its
	// replica is promoted (5s if 0). Failover tests want it short; on a loaded machine a short
	// one makes the cluster fail over on its own.
	NodeTimeout time.Duration
}

// Cluster is a running Redis Cluster of redis-server processes on loopback ports, each with its
// own data directory (AOF and nodes.conf), so a node can be killed and started again with its
// identity.
type Cluster struct {
	Nodes []*Server
}

// NodeInfo is one node as CLUSTER NODES describes it.
type NodeInfo struct {
	ID       string
	Addr     string // host:port
	Master   bool
	Failed   bool   // flagged fail or fail? by the node asked
	MasterID string // for a replica
	Slots    [][2]int
}

// HasSlot reports whether the node serves slot.
func (n NodeInfo) HasSlot(slot int) bool {
	for _, r := range n.Slots {
		if slot >= r[0] && slot <= r[1] {
			return true
		}
	}
	return false
}

// StartCluster starts a Redis Cluster (3 masters with a replica each by default) for the test,
// waits until every node reports cluster_state:ok and every replica is in sync, and stops it
// when the test ends. Missing redis-server or redis-cli binaries fail the test; they never skip it.
func StartCluster(tb testing.TB, opts ClusterOptions) *Cluster {
	tb.Helper()
	c, err := StartClusterProcesses(tb.TempDir(), opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Stop)
	return c
}

// StartClusterProcesses starts a cluster with its nodes' data under dir, outside of a test. The
// caller stops it.
func StartClusterProcesses(dir string, opts ClusterOptions) (*Cluster, error) {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		return nil, errors.New("redis-cli not found on PATH: install it (Debian: apt-get install redis-tools, part of redis-server); tests that need a Redis Cluster do not skip")
	}
	if opts.Masters == 0 {
		opts.Masters = 3
	}
	if opts.ReplicasPerMaster == 0 {
		opts.ReplicasPerMaster = 1
	}
	replicas := max(opts.ReplicasPerMaster, 0)
	if opts.NodeTimeout == 0 {
		opts.NodeTimeout = 5 * time.Second
	}
	c := &Cluster{}
	n := opts.Masters * (1 + replicas)
	for i := range n {
		ndir := filepath.Join(dir, fmt.Sprintf("node%d", i))
		if err := os.MkdirAll(ndir, 0o700); err != nil {
			c.Stop()
			return nil, err
		}
		s, err := StartProcess(ndir, Options{
			AppendFsync: opts.AppendFsync,
			ExtraArgs: []string{
				"--cluster-enabled", "yes",
				"--cluster-config-file", "nodes.conf",
				"--cluster-node-timeout", strconv.FormatInt(opts.NodeTimeout.Milliseconds(), 10),
				// A replica takes over whatever its link's age: tests kill masters at will.
				"--cluster-replica-validity-factor", "0",
			},
		})
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.Nodes = append(c.Nodes, s)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	out, err := exec.Command("redis-cli", args...).CombinedOutput()
	if err != nil {
		c.Stop()
		return nil, fmt.Errorf("redis-cli --cluster create: %v: %s", err, out)
	}
	if err := c.WaitHealthy(30 * time.Second); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// Addrs are the host:port addresses of every node, in start order.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		out[i] = s.Addr()
	}
	return out
}

// URL is a redis:// URL of the first node (a seed: clients discover the others from it).
func (c *Cluster) URL() string { return "redis://" + c.Nodes[0].Addr() }

// Stop stops every node.
func (c *Cluster) Stop() {
	for _, s := range c.Nodes {
		_ = s.Stop(false)
	}
}

// Node returns the node listening on addr, or nil.
func (c *Cluster) Node(addr string) *Server {
	for _, s := range c.Nodes {
		if s.Addr() == addr {
			return s
		}
	}
	return nil
}

// Command runs one command on the node at addr with redis-cli and returns its raw output.
// A Redis error reply is returned as an error.
func (c *Cluster) Command(addr string, args ...string) (string, error) {
	host, port, _ := strings.Cut(addr, ":")
	out, err := exec.Command("redis-cli", append([]string{"-h", host, "-p", port}, args...)...).CombinedOutput()
	s := strings.TrimRight(string(out), "\n")
	if err != nil {
		return s, fmt.Errorf("redis-cli %s on %s: %v: %s", strings.Join(args, " "), addr, err, s)
	}
	if strings.HasPrefix(s, "ERR ") || strings.HasPrefix(s, "(error)") || strings.HasPrefix(s, "MOVED ") || strings.HasPrefix(s, "CLUSTERDOWN") {
		return s, fmt.Errorf("redis-cli %s on %s: %s", strings.Join(args, " "), addr, s)
	}
	return s, nil
}

// running are the nodes whose processes are up.
func (c *Cluster) running() []*Server {
	var out []*Server
	for _, s := range c.Nodes {
		if s.Running() {
			out = append(out, s)
		}
	}
	return out
}

// Topology is CLUSTER NODES as the first running node (or the node at addr, if given) sees it.
func (c *Cluster) Topology(addr ...string) ([]NodeInfo, error) {
	var from string
	if len(addr) > 0 {
		from = addr[0]
	} else if r := c.running(); len(r) > 0 {
		from = r[0].Addr()
	} else {
		return nil, errors.New("redistest: no cluster node is running")
	}
	out, err := c.Command(from, "CLUSTER", "NODES")
	if err != nil {
		return nil, err
	}
	return parseClusterNodes(out)
}

func parseClusterNodes(out string) ([]NodeInfo, error) {
	var nodes []NodeInfo
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("redistest: unexpected CLUSTER NODES line %q", line)
		}
		addr, _, _ := strings.Cut(f[1], "@")
		n := NodeInfo{ID: f[0], Addr: addr}
		for flag := range strings.SplitSeq(f[2], ",") {
			switch flag {
			case "master":
				n.Master = true
			case "fail", "fail?":
				n.Failed = true
			}
		}
		if f[3] != "-" {
			n.MasterID = f[3]
		}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue // a slot being imported or migrated
			}
			lo, hi, found := strings.Cut(r, "-")
			if !found {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("redistest: unexpected slot range %q", r)
			}
			n.Slots = append(n.Slots, [2]int{a, b})
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// slotMap renders which master serves which slots, as a node sees it.
func slotMap(nodes []NodeInfo) string {
	var parts []string
	for _, n := range nodes {
		if n.Master && len(n.Slots) > 0 {
			parts = append(parts, fmt.Sprintf("%s=%v", n.Addr, n.Slots))
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// WaitHealthy waits until every running node reports cluster_state:ok, all of them agree on
// which master serves which slot, every slot is served by a running master, and every running
// replica's link to its master is up.
func (c *Cluster) WaitHealthy(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if last = c.healthy(); last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: cluster not healthy within %s: %v", timeout, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *Cluster) healthy() error {
	var want string
	for _, s := range c.running() {
		info, err := c.Command(s.Addr(), "CLUSTER", "INFO")
		if err != nil {
			return err
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return fmt.Errorf("%s: cluster_state is not ok", s.Addr())
		}
		nodes, err := c.Topology(s.Addr())
		if err != nil {
			return err
		}
		m := slotMap(nodes)
		if want == "" {
			want = m
		} else if m != want {
			return fmt.Errorf("nodes disagree on slots: %q vs %q", want, m)
		}
		served := 0
		for _, n := range nodes {
			if n.Master && len(n.Slots) > 0 {
				if srv := c.Node(n.Addr); srv == nil || !srv.Running() {
					return fmt.Errorf("slots %v are served by %s, which is down", n.Slots, n.Addr)
				}
				for _, r := range n.Slots {
					served += r[1] - r[0] + 1
				}
			}
		}
		if served != 16384 {
			return fmt.Errorf("%d of 16384 slots served", served)
		}
		repl, err := c.Command(s.Addr(), "INFO", "replication")
		if err != nil {
			return err
		}
		if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
			return fmt.Errorf("%s: replica link not up", s.Addr())
		}
	}
	return nil
}

// Slot is the hash slot of key.
func (c *Cluster) Slot(key string) (int, error) {
	r := c.running()
	if len(r) == 0 {
		return 0, errors.New("redistest: no cluster node is running")
	}
	out, err := c.Command(r[0].Addr(), "CLUSTER", "KEYSLOT", key)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(out))
}

// MasterOf returns the master serving slot.
func (c *Cluster) MasterOf(slot int) (NodeInfo, error) {
	nodes, err := c.Topology()
	if err != nil {
		return NodeInfo{}, err
	}
	for _, n := range nodes {
		if n.Master && !n.Failed && n.HasSlot(slot) {
			return n, nil
		}
	}
	return NodeInfo{}, fmt.Errorf("redistest: no master serves slot %d", slot)
}

// ReplicaOf returns a replica of the master with id masterID.
func (c *Cluster) ReplicaOf(masterID string) (NodeInfo, error) {
	nodes, err := c.Topology()
	if err != nil {
		return NodeInfo{}, err
	}
	for _, n := range nodes {
		if !n.Master && !n.Failed && n.MasterID == masterID {
			return n, nil
		}
	}
	return NodeInfo{}, fmt.Errorf("redistest: master %s has no replica", masterID)
}

// Failover makes the replica at addr take over from its master with CLUSTER FAILOVER (the
// coordinated, lossless kind: the replica catches up with its master first) and waits until
// the cluster is healthy again with it as master.
func (c *Cluster) Failover(addr string, timeout time.Duration) error {
	if _, err := c.Command(addr, "CLUSTER", "FAILOVER"); err != nil {
		return err
	}
	return c.waitMaster(addr, timeout)
}

// Kill stops the node at addr with SIGKILL, as a crash.
func (c *Cluster) Kill(addr string) error {
	s := c.Node(addr)
	if s == nil {
		return fmt.Errorf("redistest: no node at %s", addr)
	}
	return s.Stop(true)
}

// WaitPromoted waits until the node at addr is a master serving slots and the cluster is
// healthy (e.g. after its master was killed).
func (c *Cluster) WaitPromoted(addr string, timeout time.Duration) error {
	return c.waitMaster(addr, timeout)
}

func (c *Cluster) waitMaster(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		nodes, err := c.Topology(addr)
		if err == nil {
			for _, n := range nodes {
				if n.Addr == addr && n.Master && len(n.Slots) > 0 {
					return c.WaitHealthy(time.Until(deadline))
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: %s did not become a master within %s (%v)", addr, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// MigrateSlot moves slot, with its keys, from its master to the master at toAddr, the way
// redis-cli --cluster reshard does it: IMPORTING on the target, MIGRATING on the source, MIGRATE
// the keys in batches, then assign the slot to the target on every master. between, if not nil,
// runs while the slot is in the migrating state (after the first batch moved), so tests can act
// in the middle of a migration.
func (c *Cluster) MigrateSlot(slot int, toAddr string, between func()) error {
	src, err := c.MasterOf(slot)
	if err != nil {
		return err
	}
	nodes, err := c.Topology()
	if err != nil {
		return err
	}
	var dst NodeInfo
	for _, n := range nodes {
		if n.Addr == toAddr {
			dst = n
		}
	}
	if dst.ID == "" || !dst.Master {
		return fmt.Errorf("redistest: %s is not a master", toAddr)
	}
	if dst.ID == src.ID {
		return fmt.Errorf("redistest: slot %d is already on %s", slot, toAddr)
	}
	s := strconv.Itoa(slot)
	if _, err := c.Command(dst.Addr, "CLUSTER", "SETSLOT", s, "IMPORTING", src.ID); err != nil {
		return err
	}
	if _, err := c.Command(src.Addr, "CLUSTER", "SETSLOT", s, "MIGRATING", dst.ID); err != nil {
		return err
	}
	order := func(id string) int {
		switch id {
		case dst.ID:
			return 0
		case src.ID:
			return 1
		}
		return 2
	}
	host, port, _ := strings.Cut(dst.Addr, ":")
	for batch := 0; ; batch++ {
		out, err := c.Command(src.Addr, "CLUSTER", "GETKEYSINSLOT", s, "1")
		if err != nil {
			return err
		}
		keys := strings.Fields(out)
		if len(keys) == 0 {
			break
		}
		args := append([]string{"MIGRATE", host, port, "", "0", "10000", "KEYS"}, keys...)
		if _, err := c.Command(src.Addr, args...); err != nil {
			return err
		}
		if batch == 0 && between != nil {
			between()
		}
	}
	// The target first, then the source, then the others (as redis-cli does): the source must
	// not send clients to a target that does not know it owns the slot yet.
	slices.SortStableFunc(nodes, func(a, b NodeInfo) int { return order(a.ID) - order(b.ID) })
	for _, n := range nodes {
		if !n.Master || n.Failed {
			continue
		}
		if srv := c.Node(n.Addr); srv == nil || !srv.Running() {
			continue
		}
		if _, err := c.Command(n.Addr, "CLUSTER", "SETSLOT", s, "NODE", dst.ID); err != nil {
			return err
		}
	}
	return c.WaitHealthy(30 * time.Second)
}
