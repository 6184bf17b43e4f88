package etcdtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Snapshot saves a snapshot of the running server into path with etcd's own
// tool, as an operator would: etcdctl --endpoints URL snapshot save path,
// with args added to etcdctl's flags (e.g. TLS files).
func (s *Server) Snapshot(ctx context.Context, path string, args ...string) error {
	ctl, err := Tool(ctx, "etcdctl", s.opts.Version)
	if err != nil {
		return err
	}
	args = append([]string{"--endpoints", s.client}, args...)
	return s.run(ctx, ctl, append(args, "snapshot", "save", path)...)
}

// restore makes the data directory from Options.Restore with etcdutl
// snapshot restore, for this member's name and peer URL.
func (s *Server) restore(ctx context.Context) error {
	utl, err := Tool(ctx, "etcdutl", s.opts.Version)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(s.dataDir); err != nil {
		return fmt.Errorf("etcdtest: %w", err)
	}
	args := []string{"snapshot", "restore", s.opts.Restore, "--data-dir", s.dataDir,
		"--name", "kapi-test", "--initial-cluster", "kapi-test=" + s.peer, "--initial-advertise-peer-urls", s.peer}
	return s.run(ctx, utl, append(args, s.opts.RestoreArgs...)...)
}

// run runs one etcd tool, appending its command line and output to the
// server's log, and fails with the output when the tool does.
func (s *Server) run(ctx context.Context, bin string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	line := bin + " " + strings.Join(args, " ")
	if f, ferr := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); ferr == nil {
		fmt.Fprintf(f, "=== %s %s\n%s", time.Now().Format(time.RFC3339Nano), line, out.String())
		f.Close()
	}
	if err != nil {
		return fmt.Errorf("etcdtest: %s: %v\n%s", line, err, out.String())
	}
	return nil
}
