package etcd

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Default option values; Open uses them for fields left at their zero value.
const (
	DefaultPrefix      = "/kapi/"
	DefaultDialTimeout = 5 * time.Second
	DefaultMaxKeySize  = 4 << 10 // 4 KiB
	// DefaultMaxValueSize is what fits, with a key of DefaultMaxKeySize and
	// the transaction around it, in one request under etcd's default
	// --max-request-bytes of 1.5 MiB: 1.5 MiB minus 16 KiB.
	DefaultMaxValueSize       = 3<<19 - 16<<10
	DefaultCompactionInterval = 5 * time.Minute
	DefaultElectionTTL        = 15 * time.Second
)

// Options configures a Store.
type Options struct {
	// Endpoints are the etcd client URLs, e.g. "https://10.0.0.1:2379".
	// Required unless Client is set.
	Endpoints []string

	// Prefix is prepended to every key, so that several APIs share one etcd
	// cluster: each gets its own prefix (none a prefix of another). Default
	// "/kapi/". Leader elections live beside it, under the prefix without
	// its trailing slash followed by "-election/" (see Store.Elector).
	Prefix string

	// TLS configures the connection to etcd (server verification and client
	// certificates). Default: plain TCP. See LoadTLS.
	TLS *tls.Config

	// Username and Password authenticate to etcd when it has auth enabled.
	// The client refreshes its token by itself.
	Username, Password string

	// DialTimeout bounds how long Open waits for etcd to answer its first
	// (quorum) read. Default 5 seconds.
	DialTimeout time.Duration

	// Client, when set, is used instead of a client dialled from the fields
	// above (which are then ignored). The Store does not close it.
	Client *clientv3.Client

	// Logger receives the store's log records and the etcd client's
	// warnings and errors (its info messages at debug level). Default:
	// discard.
	Logger *slog.Logger

	// MaxKeySize is the largest accepted key in bytes. Default 4 KiB.
	MaxKeySize int

	// MaxValueSize is the largest accepted value in bytes. Default
	// DefaultMaxValueSize (1.5 MiB minus 16 KiB). Larger values need a
	// larger --max-request-bytes on every etcd member.
	MaxValueSize int

	// CompactionInterval is how often history is compacted: every interval,
	// the store compacts etcd to the revision it saw one interval earlier,
	// so history reaches back between one and two intervals. Compaction
	// runs on one instance at a time among those sharing the prefix,
	// elected through etcd (key "<prefix>-election/compactor"). Note that
	// etcd compacts the whole cluster, other prefixes included. Default 5
	// minutes, as kube-apiserver; negative: never (leave compaction to
	// etcd's own --auto-compaction-retention, or call Compact).
	CompactionInterval time.Duration

	// ElectionTTL is the lease time of the compactor's election: how long
	// after an instance dies without resigning another one takes over.
	// Default 15 seconds (etcd rounds it up to its minimum, about 2 s).
	ElectionTTL time.Duration
}

func (o Options) withDefaults() (Options, error) {
	if o.Client == nil && len(o.Endpoints) == 0 {
		return o, errors.New("etcd: Options.Endpoints is required")
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxKeySize <= 0 {
		o.MaxKeySize = DefaultMaxKeySize
	}
	if o.MaxValueSize <= 0 {
		o.MaxValueSize = DefaultMaxValueSize
	}
	if o.CompactionInterval == 0 {
		o.CompactionInterval = DefaultCompactionInterval
	}
	if o.ElectionTTL <= 0 {
		o.ElectionTTL = DefaultElectionTTL
	}
	return o, nil
}

// clientConfig is the etcd client configuration for o.
func (o Options) clientConfig() clientv3.Config {
	// Requests carry a key, a value and a little transaction framing; keep
	// the client's send limit (2 MiB by default) above the largest one.
	send := max(2<<20, o.MaxValueSize+2*(o.MaxKeySize+len(o.Prefix))+64<<10)
	return clientv3.Config{
		Endpoints:   o.Endpoints,
		DialTimeout: o.DialTimeout,
		// Detect a dead or partitioned member (and move watches off it)
		// within about 40 s, as kube-apiserver does.
		DialKeepAliveTime:    30 * time.Second,
		DialKeepAliveTimeout: 10 * time.Second,
		MaxCallSendMsgSize:   send,
		TLS:                  o.TLS,
		Username:             o.Username,
		Password:             o.Password,
		Logger:               newZapLogger(o.Logger),
	}
}

// LoadTLS returns a client TLS configuration from PEM files: caFile holds
// the CAs that sign the etcd servers' certificates (empty: the system's
// roots), certFile and keyFile the client certificate and key for etcd's
// --client-cert-auth (both empty: none).
func LoadTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("etcd: reading CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("etcd: no certificate in CA file %s", caFile)
		}
		cfg.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("etcd: a client certificate needs both a certificate and a key file")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("etcd: loading client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
