package etcd_test

import (
	"net"
	"strings"
	"sync"
	"testing"
)

// proxy forwards TCP connections to an etcd server and can be frozen:
// while frozen it delivers nothing in either direction (what it reads is
// held, not lost), as a process paused or a network that stalls, and when
// it resumes everything held arrives late.
type proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	resumed chan struct{} // closed while not frozen
	conns   []net.Conn
}

// startProxy proxies to the host:port of the etcd client URL target until
// the test ends.
func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: strings.TrimPrefix(target, "http://"), resumed: make(chan struct{})}
	close(p.resumed)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// endpoint is the client URL of the proxy.
func (p *proxy) endpoint() string { return "http://" + p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		go p.pipe(u, c)
		go p.pipe(c, u)
	}
}

// pipe copies src to dst, holding each read while the proxy is frozen.
func (p *proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			resumed := p.resumed
			p.mu.Unlock()
			<-resumed
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// freeze stops delivering bytes until resume.
func (p *proxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.resumed:
		p.resumed = make(chan struct{})
	default: // already frozen
	}
}

// resume delivers what was held and forwards again.
func (p *proxy) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.resumed:
	default:
		close(p.resumed)
	}
}

func (p *proxy) close() {
	p.resume()
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}
