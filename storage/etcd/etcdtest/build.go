package etcdtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The etcd commands Tool builds, by name: each is the main package of its
// own module.
var toolPackages = map[string]string{
	"etcd":    "go.etcd.io/etcd/server/v3",
	"etcdctl": "go.etcd.io/etcd/etcdctl/v3",
	"etcdutl": "go.etcd.io/etcd/etcdutl/v3",
}

// Binary returns the path of an etcd server binary of the given version
// (DefaultVersion when empty), building it when needed (see the package
// documentation). $KAPI_ETCD, when set, wins whatever the version.
func Binary(ctx context.Context, version string) (string, error) {
	return Tool(ctx, "etcd", version)
}

// Tool returns the path of the etcd command name ("etcd", "etcdctl" or
// "etcdutl") of the given version (DefaultVersion when empty), building it
// like Binary when needed. With $KAPI_ETCD set, etcdctl and etcdutl live in
// the directory of that binary.
func Tool(ctx context.Context, name, version string) (string, error) {
	if version == "" {
		version = DefaultVersion
	}
	pkg, ok := toolPackages[name]
	if !ok {
		return "", fmt.Errorf("etcdtest: unknown etcd command %q", name)
	}
	path, err := toolPath(name, version)
	if err != nil {
		return "", err
	}
	if fileExists(path) {
		return path, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("etcdtest: %w", err)
	}
	unlock, err := lockFile(ctx, path+".lock")
	if err != nil {
		return "", fmt.Errorf("etcdtest: locking %s.lock: %w", path, err)
	}
	defer unlock()
	if fileExists(path) { // built by another process while we waited
		return path, nil
	}
	if err := build(ctx, pkg, version, path); err != nil {
		return "", err
	}
	return path, nil
}

// Available reports whether Binary would find a binary of the version
// without building it.
func Available(version string) bool {
	return ToolAvailable("etcd", version)
}

// ToolAvailable reports whether Tool would find the command without
// building it.
func ToolAvailable(name, version string) bool {
	if version == "" {
		version = DefaultVersion
	}
	path, err := toolPath(name, version)
	return err == nil && fileExists(path)
}

// toolPath is where Tool looks for and builds the command.
func toolPath(name, version string) (string, error) {
	if path := os.Getenv("KAPI_ETCD"); path != "" {
		if name == "etcd" {
			return path, nil
		}
		return filepath.Join(filepath.Dir(path), name), nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("etcdtest: no cache directory for the etcd binaries (set KAPI_ETCD): %w", err)
	}
	return filepath.Join(cache, "kapi-etcd", version, name), nil
}

func fileExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// build compiles the main package pkg at version into path, through a
// throwaway module in a temporary directory next to it.
func build(ctx context.Context, pkg, version, path string) error {
	ctx, cancel := context.WithTimeout(ctx, BuildTimeout)
	defer cancel()
	dir, err := os.MkdirTemp(filepath.Dir(path), "build-")
	if err != nil {
		return fmt.Errorf("etcdtest: %w", err)
	}
	defer os.RemoveAll(dir)
	gomod := fmt.Sprintf("// Throwaway module: builds %s %s for kapi's tests.\nmodule kapi.local/etcdbuild\n\ngo 1.24\n\nrequire %s %s\n", pkg, version, pkg, version)
	tools := fmt.Sprintf("//go:build tools\n\npackage tools\n\nimport _ %q\n", pkg)
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		return fmt.Errorf("etcdtest: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tools.go"), []byte(tools), 0o644); err != nil {
		return fmt.Errorf("etcdtest: %w", err)
	}
	tmp := filepath.Join(dir, filepath.Base(path))
	ld := "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=module-" + version
	for _, args := range [][]string{
		{"mod", "tidy"},
		{"build", "-trimpath", "-ldflags", ld, "-o", tmp, pkg},
	} {
		cmd := exec.CommandContext(ctx, goCommand(), args...)
		cmd.Dir = dir
		// Outside any workspace, plain module mode, no cgo (faster, static).
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("etcdtest: building %s %s: go %s: %v\n%s", pkg, version, strings.Join(args, " "), err, out.String())
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("etcdtest: %w", err)
	}
	return nil
}

// goCommand is the go command of the running toolchain when known (go test
// puts its bin directory first in PATH), else "go".
func goCommand() string {
	if root := os.Getenv("GOROOT"); root != "" {
		if p := filepath.Join(root, "bin", "go"); fileExists(p) {
			return p
		}
	}
	return "go"
}
