package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"sigs.k8s.io/yaml"

	"github.com/kapi-dev/kapi/apiserver"
	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/badger"
)

// Backups: a running quickstart serves GET /backup (authorized as that
// non-resource URL); the subcommands take a backup over it, verify backups
// and restore them into a new data directory:
//
//	quickstart backup --out full.kbak
//	quickstart backup --since 1234 --out inc.kbak
//	quickstart verify-backup full.kbak inc.kbak
//	quickstart restore --data-dir ./restored [--to-revision N] full.kbak inc.kbak

// mountBackup serves backups of the store at /backup when it can make them
// (Badger, on disk or in memory; not etcd: use etcdctl snapshot save).
func mountBackup(cfg *apiserver.Config) {
	if b, ok := cfg.Storage.(storage.Backuper); ok {
		cfg.NonResourceHandlers["/backup"] = apiserver.BackupHandler(b, cfg.Logger)
	}
}

// runSubcommand runs the subcommand args[0] names, if it is one.
func runSubcommand(ctx context.Context, args []string) (bool, error) {
	if len(args) == 0 {
		return false, nil
	}
	switch args[0] {
	case "backup":
		return true, runBackup(ctx, args[1:])
	case "verify-backup":
		return true, runVerify(args[1:])
	case "restore":
		return true, runRestore(ctx, args[1:])
	}
	return false, nil
}

func runBackup(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "./data/kubeconfig", "kubeconfig of the server to back up (the quickstart writes one into its data directory); its user needs get on the non-resource URL /backup")
	out := fs.String("out", "", "file to write the backup to (required; replaced only once the backup is complete and verified)")
	since := fs.Int64("since", 0, "take an incremental backup of the changes after this revision (an earlier backup's revision)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() > 0 {
		return errors.New("backup: usage: quickstart backup [--kubeconfig FILE] [--since REV] --out FILE")
	}
	server, client, token, err := loadKubeconfig(*kubeconfig)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	url := server + "/backup"
	if *since > 0 {
		url += "?since=" + strconv.FormatInt(*since, 10)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return fmt.Errorf("backup: %s answered %s: %s", url, resp.Status, body)
	}
	info, err := saveVerified(*out, resp.Body)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	fmt.Printf("backup of revision %d (history from %d%s) written to %s, %d bytes\n",
		info.Revision, info.CompactedRevision, sinceText(info), *out, info.Bytes)
	return nil
}

// saveVerified writes r to path through a temporary file that must verify
// as a complete backup before it takes path's place.
func saveVerified(path string, r io.Reader) (storage.BackupInfo, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".partial-*")
	if err != nil {
		return storage.BackupInfo{}, err
	}
	defer os.Remove(tmp.Name()) // after the rename: nothing to remove
	_, err = io.Copy(tmp, r)
	if err == nil {
		err = tmp.Sync()
	}
	if err == nil {
		_, err = tmp.Seek(0, io.SeekStart)
	}
	var info storage.BackupInfo
	if err == nil {
		info, err = badger.VerifyBackup(tmp)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	return info, err
}

func sinceText(info storage.BackupInfo) string {
	if info.Since == 0 {
		return ", full"
	}
	return fmt.Sprintf(", incremental since %d", info.Since)
}

func runVerify(args []string) error {
	if len(args) == 0 {
		return errors.New("verify-backup: usage: quickstart verify-backup FILE [FILE...]")
	}
	for _, p := range args {
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("verify-backup: %w", err)
		}
		info, err := badger.VerifyBackup(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("verify-backup: %w", err)
		}
		fmt.Printf("%s: revision %d, history from %d%s, %d bytes, checksum ok\n",
			p, info.Revision, info.CompactedRevision, sinceText(info), info.Bytes)
	}
	return nil
}

func runRestore(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	dataDir := fs.String("data-dir", "", "new data directory to restore into (required; its db/ must not exist or be empty)")
	to := fs.Int64("to-revision", 0, "restore the state at this revision (default: the last backup's); any revision from the full backup's history start to the last backup's revision")
	bump := fs.Int64("bump-revision", badger.DefaultRestoreBump, "the restored server starts this many revisions above the last backup's; more than the writes made after it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dataDir == "" || fs.NArg() == 0 {
		return errors.New("restore: usage: quickstart restore --data-dir DIR [--to-revision REV] FULL [INCREMENTAL...]")
	}
	var files []io.Reader
	for _, p := range fs.Args() {
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		defer f.Close()
		files = append(files, f)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	db := filepath.Join(*dataDir, "db")
	info, err := badger.Restore(ctx, db, badger.RestoreOptions{ToRevision: *to, BumpRevision: *bump, Logger: logger}, files...)
	if err != nil {
		return err
	}
	fmt.Printf("restored the state at revision %d into %s; the server starts at revision %d.\n"+
		"Start it with --data-dir %s (copy pki/ from the old data directory first to keep its CA and admin token).\n",
		info.Revision, db, info.StoreRevision, *dataDir)
	return nil
}

// loadKubeconfig reads the current context's server, CA, client
// certificate and token from a kubeconfig with inline data, as the
// quickstart writes.
func loadKubeconfig(path string) (server string, client *http.Client, token string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", nil, "", err
	}
	var kc struct {
		CurrentContext string `json:"current-context"`
		Contexts       []struct {
			Name    string
			Context struct{ Cluster, User string }
		}
		Clusters []struct {
			Name    string
			Cluster struct {
				Server string
				CA     string `json:"certificate-authority-data"`
			}
		}
		Users []struct {
			Name string
			User struct {
				Token string
				Cert  string `json:"client-certificate-data"`
				Key   string `json:"client-key-data"`
			}
		}
	}
	if err := yaml.Unmarshal(b, &kc); err != nil {
		return "", nil, "", fmt.Errorf("%s: %w", path, err)
	}
	var clusterName, userName string
	for _, c := range kc.Contexts {
		if c.Name == kc.CurrentContext {
			clusterName, userName = c.Context.Cluster, c.Context.User
		}
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	for _, c := range kc.Clusters {
		if c.Name != clusterName {
			continue
		}
		server = c.Cluster.Server
		if c.Cluster.CA != "" {
			pem, err := base64.StdEncoding.DecodeString(c.Cluster.CA)
			if err != nil {
				return "", nil, "", fmt.Errorf("%s: certificate-authority-data: %w", path, err)
			}
			tlsConfig.RootCAs = x509.NewCertPool()
			if !tlsConfig.RootCAs.AppendCertsFromPEM(pem) {
				return "", nil, "", fmt.Errorf("%s: certificate-authority-data holds no certificate", path)
			}
		}
	}
	if server == "" {
		return "", nil, "", fmt.Errorf("%s: no server for the current context %q", path, kc.CurrentContext)
	}
	for _, u := range kc.Users {
		if u.Name != userName {
			continue
		}
		token = u.User.Token
		if u.User.Cert != "" {
			cert, err1 := base64.StdEncoding.DecodeString(u.User.Cert)
			key, err2 := base64.StdEncoding.DecodeString(u.User.Key)
			pair, err3 := tls.X509KeyPair(cert, key)
			if err := errors.Join(err1, err2, err3); err != nil {
				return "", nil, "", fmt.Errorf("%s: client certificate: %w", path, err)
			}
			tlsConfig.Certificates = []tls.Certificate{pair}
		}
	}
	return server, &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig, Proxy: http.ProxyFromEnvironment}}, token, nil
}
