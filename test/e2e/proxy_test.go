package e2e

import (
	"io"
	"net"
	"sync"
	"testing"
)

// holdProxy forwards TCP connections to a target (TLS passes through untouched). While it holds,
// it accepts new connections but forwards nothing for them until Release: a client's request
// then waits in its TLS handshake, so a test decides exactly when it reaches the server.
type holdProxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	holding bool
	held    []net.Conn
	conns   map[net.Conn]struct{}
	closed  bool
	wg      sync.WaitGroup
}

// newHoldProxy starts a proxy on a loopback port for target (host:port); it stops with the test.
func newHoldProxy(t *testing.T, target string) *holdProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &holdProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's host:port.
func (p *holdProxy) Addr() string { return p.ln.Addr().String() }

// Hold makes new connections wait (open connections keep flowing).
func (p *holdProxy) Hold() {
	p.mu.Lock()
	p.holding = true
	p.mu.Unlock()
}

// Release forwards the held connections and every later one; it returns how many were held.
func (p *holdProxy) Release() int {
	p.mu.Lock()
	held := p.held
	p.held, p.holding = nil, false
	p.mu.Unlock()
	for _, c := range held {
		p.wg.Add(1)
		go p.forward(c)
	}
	return len(held)
}

// Held is the number of connections waiting.
func (p *holdProxy) Held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.held)
}

func (p *holdProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return
		}
		if p.holding {
			p.held = append(p.held, c)
			p.mu.Unlock()
			continue
		}
		p.mu.Unlock()
		p.wg.Add(1)
		go p.forward(c)
	}
}

// track records an open connection; it is false once the proxy is closed.
func (p *holdProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *holdProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *holdProxy) forward(client net.Conn) {
	defer p.wg.Done()
	if !p.track(client) {
		client.Close()
		return
	}
	defer p.untrack(client)
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(up) {
		up.Close()
		return
	}
	defer p.untrack(up)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, client); done <- struct{}{} }()
	go func() { _, _ = io.Copy(client, up); done <- struct{}{} }()
	// Either direction ending ends the connection (the deferred closes end the other copy).
	<-done
}

// Close stops accepting and closes every connection.
func (p *holdProxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	conns := make([]net.Conn, 0, len(p.conns)+len(p.held))
	for c := range p.conns {
		conns = append(conns, c)
	}
	conns = append(conns, p.held...)
	p.held = nil
	p.mu.Unlock()
	p.ln.Close()
	for _, c := range conns {
		c.Close()
	}
	p.wg.Wait()
}
