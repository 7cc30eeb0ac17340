package chaos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Proxy puts the manager processes behind one local, plain-HTTP reverse
// proxy to the API server, so that their requests can be faulted and their
// ConfigMap deletions attributed without any hook in the manager. Each
// replica has its own path prefix ("/<replica>/api/..."), its own Injector
// and its own kubeconfig, which authenticates nothing: the proxy forwards
// with the credentials of the rest.Config it was given.
type Proxy struct {
	target   *url.URL
	upstream http.RoundTripper
	listener net.Listener
	server   *http.Server
	hooks    ProxyHooks

	mu       sync.Mutex
	replicas map[string]*Injector
	proxies  map[string]*httputil.ReverseProxy
}

// ProxyHooks are told what the replicas' Injectors see; any may be nil.
type ProxyHooks struct {
	// OnDelete is told of every ConfigMap DELETE that reached the server,
	// OnLate of every held write once sent, OnRead of every read of
	// Machines (Injector.OnMachineRead).
	OnDelete func(Deletion)
	OnLate   func(LateWrite)
	OnRead   func(actor, machine string)
}

// NewProxy starts a Proxy to the API server of cfg on a free local port.
func NewProxy(cfg *rest.Config, hooks ProxyHooks) (*Proxy, error) {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("parsing the API server address %q: %w", cfg.Host, err)
	}
	upstream, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the transport to the API server: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, upstream: upstream, hooks: hooks, listener: l,
		replicas: map[string]*Injector{}, proxies: map[string]*httputil.ReverseProxy{}}
	p.server = &http.Server{Handler: p, ReadHeaderTimeout: 0}
	go func() { _ = p.server.Serve(l) }()
	return p, nil
}

// Close stops the proxy and closes every connection through it.
func (p *Proxy) Close() error {
	err := p.server.Close()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Replica registers a replica name, with its faults drawn from seed, and
// writes its kubeconfig into dir. It returns the kubeconfig's path and the
// replica's Injector.
func (p *Proxy) Replica(name, dir string, seed uint64) (string, *Injector, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	inj, ok := p.replicas[name]
	if !ok {
		inj = NewInjector(name, p.upstream, seed, p.hooks.OnDelete)
		inj.OnLateWrite(p.hooks.OnLate)
		inj.OnMachineRead(p.hooks.OnRead)
		p.replicas[name] = inj
		rp := &httputil.ReverseProxy{
			Rewrite: func(r *httputil.ProxyRequest) {
				r.SetURL(p.target)
				r.Out.URL.Path = strings.TrimPrefix(r.In.URL.Path, "/"+name)
				r.Out.URL.RawPath = ""
				r.Out.Host = p.target.Host
			},
			Transport:     inj,
			FlushInterval: -1, // watches stream
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				if errors.Is(err, context.Canceled) {
					return
				}
				// The manager sees an error it cannot tell from a
				// connection reset.
				w.WriteHeader(http.StatusBadGateway)
			},
		}
		p.proxies[name] = rp
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["chaos"] = &clientcmdapi.Cluster{Server: "http://" + p.listener.Addr().String() + "/" + name}
	kc.AuthInfos["chaos"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["chaos"] = &clientcmdapi.Context{Cluster: "chaos", AuthInfo: "chaos"}
	kc.CurrentContext = "chaos"
	path := filepath.Join(dir, name+".kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return "", nil, err
	}
	return path, inj, nil
}

// injectors returns the Injectors of the replicas registered so far.
func (p *Proxy) injectors() []*Injector {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Collect(maps.Values(p.replicas))
}

// SetFaults sets the faults of every replica registered.
func (p *Proxy) SetFaults(f Faults) {
	for _, inj := range p.injectors() {
		inj.SetFaults(f)
	}
}

// WaitLate waits until every write held so far has been sent.
func (p *Proxy) WaitLate() {
	for _, inj := range p.injectors() {
		inj.WaitLate()
	}
}

// Stats sums the fault statistics of every replica.
func (p *Proxy) Stats() FaultStats {
	var s FaultStats
	for _, inj := range p.injectors() {
		s = s.Add(inj.Stats())
	}
	return s
}

// ServeHTTP routes a request to its replica's reverse proxy.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	p.mu.Lock()
	rp, ok := p.proxies[name]
	p.mu.Unlock()
	if !ok {
		http.Error(w, "unknown replica", http.StatusNotFound)
		return
	}
	rp.ServeHTTP(w, r)
}
