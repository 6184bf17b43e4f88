package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromiumPath is the browser the browser test drives: $KAPI_CHROMIUM, or
// Chromium from the PATH (Debian's package chromium installs
// /usr/bin/chromium). Missing, the test fails: CI installs it (.ci/run).
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("KAPI_CHROMIUM"); p != "" {
		path, err := exec.LookPath(p)
		if err != nil {
			t.Fatalf("KAPI_CHROMIUM: %v", err)
		}
		return path
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no Chromium found: install it (apt-get install chromium) or set KAPI_CHROMIUM to a Chromium or Chrome binary")
	return ""
}

// browserExample is the examples/browser program, built once per test and
// run (and restarted) on one data directory and address.
type browserExample struct {
	bin, dataDir, logPath string
	addr                  string // host:port, fixed after the first start
	cmd                   *exec.Cmd
	exited                chan error
}

func buildBrowserExample(t *testing.T) *browserExample {
	t.Helper()
	dir := t.TempDir()
	b := &browserExample{bin: filepath.Join(dir, "browser"), dataDir: filepath.Join(dir, "data"), logPath: filepath.Join(dir, "browser.log")}
	args := []string{"build", "-o", b.bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	if err := goBuild(append(args, "github.com/kapi-dev/kapi/examples/browser")...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.stop(t)
		if t.Failed() {
			log, _ := os.ReadFile(b.logPath)
			t.Logf("browser example log:\n%s", tail(string(log), 60))
		}
	})
	return b
}

// start runs the program (Badger in dataDir, a 1s history window) on a free
// loopback port the first time, on the same address afterwards, and waits
// until it prints its URL.
func (b *browserExample) start(t *testing.T) {
	t.Helper()
	listen := b.addr
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	logFile, err := os.OpenFile(b.logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close() // the child has its own descriptor
	cmd := exec.Command(b.bin, "--data-dir", b.dataDir, "--listen", listen, "--history-window", "1s")
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	b.cmd, b.exited = cmd, make(chan error, 1)
	urls := make(chan string, 1)
	go func(exited chan<- error) {
		// The program prints "UI: http://127.0.0.1:PORT/ui/" once it listens.
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "UI: "); ok {
				urls <- strings.TrimSuffix(strings.TrimPrefix(u, "http://"), "/ui/")
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}(b.exited)
	select {
	case b.addr = <-urls:
	case err := <-b.exited:
		b.cmd = nil
		t.Fatalf("the browser example exited before it listened: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the browser example did not print its URL within 60s")
	}
}

// stop ends the program with SIGINT (a graceful shutdown) and waits.
func (b *browserExample) stop(t *testing.T) {
	t.Helper()
	if b.cmd == nil {
		return
	}
	_ = b.cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-b.exited:
		if err != nil {
			t.Errorf("the browser example exited with %v", err)
		}
	case <-time.After(20 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.exited
		t.Errorf("the browser example did not stop within 20s of SIGINT")
	}
	b.cmd = nil
}

// TestBrowserLiveWidgets opens the page of examples/browser in headless
// Chromium and checks that it follows the API live, from its watch: widgets
// created, changed and deleted over HTTP appear, change and disappear
// without a reload, and the page's own create and delete work. It ends with
// a screenshot, which must show the rendered table.
func TestBrowserLiveWidgets(t *testing.T) {
	chromium := chromiumPath(t)
	example := buildBrowserExample(t)
	example.start(t)
	base := "http://" + example.addr
	widgetsURL := base + "/k8s/apis/example.dev/v1/namespaces/default/widgets"

	call := func(method, url, contentType, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	create := func(name, color string, size int, message string) {
		t.Helper()
		body := fmt.Sprintf(`{"apiVersion":"example.dev/v1","kind":"Widget","metadata":{"name":%q},"spec":{"size":%d,"color":%q,"message":%q}}`, name, size, color, message)
		if code, resp := call("POST", widgetsURL, "application/json", body); code != http.StatusCreated {
			t.Fatalf("create %s: %d %s", name, code, resp)
		}
	}

	// One widget exists before the page loads: it comes from the list.
	create("w0", "green", 4, "listed")

	chromeLog, err := os.Create(filepath.Join(t.TempDir(), "chromium.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { chromeLog.Close() })
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1024, 700),
		chromedp.CombinedOutput(chromeLog),
	)
	ctx, cancelBrowser := chromedp.NewContext(allocCtx, chromedp.WithLogf(t.Logf))
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute) // the browser's whole life
	t.Cleanup(func() {
		cancelTimeout()
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = chromedp.Cancel(ctx) // closes the browser
			cancelBrowser()
			cancelAlloc()
		}()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			// chromedp waits forever for a browser that never started.
			t.Error("chromedp did not stop within 20s")
		}
	})
	// Start the browser first: after a failed start, chromedp must not be
	// asked to run anything else.
	if err := chromedp.Do(ctx); err != nil {
		out, _ := os.ReadFile(chromeLog.Name())
		t.Fatalf("starting %s: %v\n%s", chromium, err, tail(string(out), 30))
	}
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			html, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("body")))
			t.Fatalf("%s: %v\npage:\n%s", what, err, html)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	row := func(name string) string { return fmt.Sprintf(`tr.widget[data-name=%q]`, name) }

	do("open the page and start watching",
		chromedp.EmulateViewport(1024, 700),
		chromedp.Navigate(base+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS("#state.live")),
		chromedp.WaitVisible(chromedp.CSS(row("w0"))),
	)
	// A reload would lose this marker: the page must update in place.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.kapiNoReload = true`)); err != nil {
		t.Fatal(err)
	}

	create("w1", "red", 3, "hello")
	do("the created widget appears", chromedp.WaitVisible(chromedp.CSS(row("w1")+`[data-color="red"][data-size="3"]`)))
	if got := text(row("w1")); !strings.Contains(got, "hello") || !strings.Contains(got, "default") {
		t.Fatalf("row of w1: %q", got)
	}
	create("w2", "blue", 6, "to be deleted")
	do("a second widget appears", chromedp.WaitVisible(chromedp.CSS(row("w2"))))

	if code, resp := call("PATCH", widgetsURL+"/w1", "application/merge-patch+json", `{"spec":{"color":"blue","size":7,"message":"changed"}}`); code != 200 {
		t.Fatalf("patch w1: %d %s", code, resp)
	}
	do("the change shows", chromedp.WaitVisible(chromedp.CSS(row("w1")+`[data-color="blue"][data-size="7"]`)))
	if got := text(row("w1")); !strings.Contains(got, "changed") {
		t.Fatalf("row of w1 after the patch: %q", got)
	}

	if code, resp := call("DELETE", widgetsURL+"/w2", "", ""); code != 200 {
		t.Fatalf("delete w2: %d %s", code, resp)
	}
	do("the deleted widget disappears", chromedp.WaitNotPresent(chromedp.CSS(row("w2"))))

	// The page's own form and delete button write through the API; the
	// table changes from the watch events.
	do("create a widget from the page",
		chromedp.SendKeys(chromedp.CSS(`#create input[name="name"]`), "w3"),
		chromedp.SetValue(chromedp.CSS(`#create select[name="color"]`), "red"),
		chromedp.SendKeys(chromedp.CSS(`#create input[name="message"]`), "from the page"),
		chromedp.Click(chromedp.CSS(`#create button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(row("w3")+`[data-color="red"]`)),
	)
	if code, resp := call("GET", widgetsURL+"/w3", "", ""); code != 200 || !strings.Contains(resp, `"message":"from the page"`) {
		t.Fatalf("w3 created by the page: %d %s", code, resp)
	}
	do("delete it from the page",
		chromedp.Click(chromedp.CSS(row("w3")+" button.delete")),
		chromedp.WaitNotPresent(chromedp.CSS(row("w3"))),
	)
	if code, _ := call("GET", widgetsURL+"/w3", "", ""); code != http.StatusNotFound {
		t.Fatalf("w3 after the page deleted it: %d", code)
	}

	// w1 created and patched, w2 created and deleted, w3 created and deleted.
	if events := text("#events"); events != "6" {
		t.Fatalf("the page counted %s watch events, want 6", events)
	}
	if lists := text("#lists"); lists != "1" {
		t.Fatalf("the page listed %s times, want once", lists)
	}

	// A restart of the server ends the page's watch; the page reconnects
	// and resumes from its resourceVersion (history is kept on disk), so
	// it does not list again.
	example.stop(t)
	do("the page notices the server is gone", chromedp.WaitVisible(chromedp.CSS("#state.error")))
	example.start(t)
	create("w4", "green", 2, "after the restart")
	do("the page resumes its watch", chromedp.WaitVisible(chromedp.CSS("#state.live")), chromedp.WaitVisible(chromedp.CSS(row("w4"))))
	if lists := text("#lists"); lists != "1" {
		t.Fatalf("after a restart the page listed %s times, want once (a resumed watch)", lists)
	}

	// A page that fell behind the history window (1s here) gets 410 Gone
	// when it watches again, and lists afresh. Wait until revision 2 is
	// compacted, send the page back to it, and make it watch again.
	for deadline := time.Now().Add(20 * time.Second); ; {
		code, _ := call("GET", widgetsURL+"?resourceVersion=2&resourceVersionMatch=Exact", "", "")
		if code == http.StatusGone {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("revision 2 is still readable (%d) after 20s with a 1s history window", code)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[string](`resourceVersion = "2"`)); err != nil {
		t.Fatal(err)
	}
	example.stop(t)
	do("the page notices the server is gone again", chromedp.WaitVisible(chromedp.CSS("#state.error")))
	example.start(t)
	do("the page lists again after 410 Gone", chromedp.WaitVisible(chromedp.CSS("#state.live")))
	for deadline := time.Now().Add(20 * time.Second); text("#lists") != "2"; {
		if time.Now().After(deadline) {
			t.Fatalf("the page listed %s times, want 2 (410 Gone, then a new list)", text("#lists"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	create("w5", "red", 5, "after the relist")
	do("the page is live after the relist", chromedp.WaitVisible(chromedp.CSS(row("w5"))))

	noReload, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.kapiNoReload === true`))
	if err != nil {
		t.Fatal(err)
	}
	if !noReload {
		t.Fatal("the page was reloaded; it must update from its watch")
	}
	names, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("tr.widget")].map(r => r.dataset.name)`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(names, ",") != "w0,w1,w4,w5" {
		t.Fatalf("rows %v, want w0,w1,w4,w5", names)
	}

	shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	checkScreenshot(t, shot)
}

// checkScreenshot decodes the PNG, checks its size, that it is not blank
// and that the blue of w1's swatch and bar is there; it keeps the file in
// the test's temporary directory, and in $KAPI_ARTIFACTS when set.
func checkScreenshot(t *testing.T, shot []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "browser.png")
	if dir := os.Getenv("KAPI_ARTIFACTS"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		path = filepath.Join(dir, "browser.png")
	}
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(shot))

	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	b := img.Bounds()
	if b.Dx() != 1024 || b.Dy() != 700 {
		t.Fatalf("screenshot is %dx%d, want 1024x700", b.Dx(), b.Dy())
	}
	rgb := func(x, y int) (int, int, int) {
		r, g, bl, _ := img.At(x, y).RGBA()
		return int(r >> 8), int(g >> 8), int(bl >> 8)
	}
	near := func(x, y, r, g, bl int) bool {
		pr, pg, pb := rgb(x, y)
		return abs(pr-r) <= 24 && abs(pg-g) <= 24 && abs(pb-bl) <= 24
	}
	bgR, bgG, bgB := rgb(b.Min.X+2, b.Min.Y+2)
	differ, blue := 0, 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if !near(x, y, bgR, bgG, bgB) {
				differ++
			}
			if near(x, y, 0x31, 0x82, 0xce) { // the page's blue
				blue++
			}
		}
	}
	total := b.Dx() * b.Dy()
	if differ < total/100 {
		t.Fatalf("the screenshot looks blank: %d of %d pixels differ from the background (%d,%d,%d)", differ, total, bgR, bgG, bgB)
	}
	if blue < 200 {
		t.Fatalf("the screenshot shows %d pixels of the blue widget, want at least 200", blue)
	}
	t.Logf("screenshot: %d of %d pixels differ from the background, %d blue", differ, total, blue)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
