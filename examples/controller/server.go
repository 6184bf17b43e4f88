package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kapi-dev/kapi/apiserver"
	"github.com/kapi-dev/kapi/apiserver/auth"
	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/storage/badger"
)

// server is the embedded kapi API: Badger in <data-dir>/db, served over
// HTTPS on a loopback address with a certificate made at start and an admin
// token, exactly what a remote API server would offer a controller.
type server struct {
	Addr       string       // host:port it listens on
	RESTConfig *rest.Config // for clients in this process

	store *badger.Store
	api   *apiserver.Server
	http  *http.Server
	done  chan struct{}
}

// startServer opens the store in dataDir, registers ConfigMaps and Widgets
// and serves them on listen (e.g. 127.0.0.1:0 for a free port).
func startServer(ctx context.Context, logger *slog.Logger, dataDir, listen string) (_ *server, err error) {
	store, err := badger.Open(badger.DefaultOptions(filepath.Join(dataDir, "db")).WithLogger(logger.With("component", "badger")))
	if err != nil {
		return nil, fmt.Errorf("opening storage: %w", err)
	}
	s := &server{store: store, done: make(chan struct{})}
	defer func() {
		if err != nil {
			s.closeStorage()
		}
	}()

	token := randomHex(16)
	s.api, err = apiserver.New(ctx, apiserver.Config{
		Storage: store,
		Logger:  logger.With("component", "kapi"),
		Authenticator: auth.StaticTokens(map[string]auth.User{
			token: {Name: "admin", UID: "admin", Groups: []string{auth.GroupMasters}},
		}),
	})
	if err != nil {
		return nil, err
	}
	widgets, err := widgetResource()
	if err != nil {
		return nil, err
	}
	for _, res := range []registry.Resource{registry.ConfigMaps(), widgets} {
		if err := s.api.Register(res); err != nil {
			return nil, err
		}
	}

	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	s.Addr = ln.Addr().String()
	cert, caPEM, err := selfSignedCert(ln.Addr().(*net.TCPAddr).IP)
	if err != nil {
		ln.Close()
		return nil, err
	}
	s.http = &http.Server{
		Handler:           s.api,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}},
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
	}
	s.http.RegisterOnShutdown(s.api.EndWatches)
	go func() {
		defer close(s.done)
		if err := s.http.ServeTLS(ln, "", ""); !errors.Is(err, http.ErrServerClosed) {
			logger.Error("serving the API", "err", err)
		}
	}()
	s.RESTConfig = &rest.Config{
		Host:            "https://" + s.Addr,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: caPEM},
		QPS:             50,
		Burst:           100,
	}
	return s, nil
}

// writeKubeconfig writes a kubeconfig for kubectl with the server's URL, CA
// and token.
func (s *server) writeKubeconfig(path string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kapi"] = &clientcmdapi.Cluster{Server: s.RESTConfig.Host, CertificateAuthorityData: s.RESTConfig.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: s.RESTConfig.BearerToken}
	cfg.Contexts["kapi"] = &clientcmdapi.Context{Cluster: "kapi", AuthInfo: "admin", Namespace: "default"}
	cfg.CurrentContext = "kapi"
	return clientcmd.WriteToFile(*cfg, path)
}

// Close stops serving (open watches end first), then closes the API and the
// store.
func (s *server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.http.Shutdown(ctx)
	<-s.done
	return errors.Join(err, s.closeStorage())
}

func (s *server) closeStorage() error {
	var err error
	if s.api != nil {
		err = s.api.Close()
	}
	return errors.Join(err, s.store.Close())
}

// selfSignedCert returns a serving certificate for ip, localhost and
// 127.0.0.1 that is its own CA, and its PEM for clients to trust.
func selfSignedCert(ip net.IP) (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "kapi controller example"},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{ip, net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
