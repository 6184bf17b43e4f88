package e2e

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// kubectlStream starts a long-running kubectl (get -w) against s and returns
// a function that waits up to 60 s for an output line matching a regexp,
// logging the lines it skips. kubectl is stopped when the test ends.
func kubectlStream(t *testing.T, s *server, args ...string) (expect func(re string)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	cmd := exec.CommandContext(ctx, kubectlBin, append([]string{"--kubeconfig", s.Kubeconfig, "--cache-dir", filepath.Join(s.kubectlHome, "cache")}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG=", "HOME="+s.kubectlHome)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("kubectl stderr:\n%s", stderr.String())
		}
	})
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return func(re string) {
		t.Helper()
		rx := regexp.MustCompile(re)
		timeout := time.After(60 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("kubectl ended before printing a line matching %q", re)
				}
				if rx.MatchString(l) {
					return
				}
				t.Logf("kubectl: %s", l)
			case <-timeout:
				t.Fatalf("kubectl printed no line matching %q within 60s", re)
			}
		}
	}
}
