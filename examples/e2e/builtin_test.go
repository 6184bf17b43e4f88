package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// TestKubectlSecrets: kubectl's secret generators, the Table, stringData
// merged into data and never shown, kube-apiserver's answers to bad data.
func TestKubectlSecrets(t *testing.T) {
	t.Parallel()
	needKubectl(t)
	s := startServer(t)

	s.MustKubectl(t, "create", "secret", "generic", "gen", "--from-literal=user=admin", "--from-literal=pass=s3cret")
	// The server's own serving certificate and key (in <data-dir>/pki).
	pki := filepath.Join(s.DataDir, "pki")
	s.MustKubectl(t, "create", "secret", "tls", "web", "--cert", filepath.Join(pki, "server.crt"), "--key", filepath.Join(pki, "server.key"))
	s.MustKubectl(t, "create", "secret", "docker-registry", "reg", "--docker-server=registry.test", "--docker-username=u", "--docker-password=p")

	out := s.MustKubectl(t, "get", "secrets")
	rows := parseTable(t, out)
	got := map[string]string{}
	for _, r := range rows {
		if r["AGE"] == "" {
			t.Errorf("get secrets: no AGE in %v\n%s", r, out)
		}
		got[r["NAME"]] = r["TYPE"] + " " + r["DATA"]
	}
	want := map[string]string{"gen": "Opaque 2", "web": "kubernetes.io/tls 2", "reg": "kubernetes.io/dockerconfigjson 1"}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("get secrets: %s is %q, want %q\n%s", name, got[name], w, out)
		}
	}

	// stringData is merged into data on create and on apply, and never shown.
	manifest := writeFile(t, "s.yaml", `apiVersion: v1
kind: Secret
metadata:
  name: applied
stringData:
  greeting: hello
data:
  other: `+base64.StdEncoding.EncodeToString([]byte("x"))+`
`)
	s.MustKubectl(t, "apply", "-f", manifest)
	s.MustKubectl(t, "apply", "-f", writeFile(t, "s2.yaml", `apiVersion: v1
kind: Secret
metadata:
  name: applied
stringData:
  greeting: changed
  more: "yes"
`))
	for _, name := range []string{"gen", "applied"} {
		y := s.MustKubectl(t, "get", "secret", name, "-o", "yaml")
		if strings.Contains(y, "\nstringData:") || !strings.HasPrefix(y, "apiVersion: v1\ndata:\n") {
			t.Errorf("get secret %s -o yaml shows stringData or no data:\n%s", name, y)
		}
	}
	if v := s.MustKubectl(t, "get", "secret", "applied", "-o", "jsonpath={.data.greeting} {.data.more} {.data.other}"); v != base64.StdEncoding.EncodeToString([]byte("changed"))+" "+base64.StdEncoding.EncodeToString([]byte("yes"))+" " {
		t.Errorf("applied secret data: %q", v)
	}
	if v := s.MustKubectl(t, "get", "secret", "gen", "-o", "jsonpath={.data.user}"); v != base64.StdEncoding.EncodeToString([]byte("admin")) {
		t.Errorf("gen data.user = %q", v)
	}

	// Bad input: kube-apiserver's answers.
	r := s.Kubectl(t, "create", "-f", writeFile(t, "bad.yaml", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: bad\ndata:\n  k: not-base64!\n"))
	if r.Err == nil || !strings.Contains(r.Stderr, `Error from server (BadRequest)`) || !strings.Contains(r.Stderr, `Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte`) {
		t.Errorf("create with bad base64: %v\n%s", r.Err, r.Stderr)
	}
	r = s.Kubectl(t, "create", "-f", writeFile(t, "tls.yaml", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: badtls\ntype: kubernetes.io/tls\nstringData:\n  tls.crt: x\n"))
	if r.Err == nil || !strings.Contains(r.Stderr, `Secret "badtls" is invalid: data[tls.key]: Required value`) {
		t.Errorf("create a tls secret without tls.key: %v\n%s", r.Err, r.Stderr)
	}
	r = s.Kubectl(t, "patch", "secret", "gen", "--type=merge", "-p", `{"type":"kubernetes.io/basic-auth"}`)
	if r.Err == nil || !strings.Contains(r.Stderr, `type: Invalid value: "kubernetes.io/basic-auth": field is immutable`) {
		t.Errorf("patch the type: %v\n%s", r.Err, r.Stderr)
	}
}

// TestKubectlSystemNamespaces: kube-system, kube-public and kube-node-lease
// exist from the start, and default, kube-system and kube-public may not be
// deleted.
func TestKubectlSystemNamespaces(t *testing.T) {
	t.Parallel()
	needKubectl(t)
	s := startServer(t)
	out := s.MustKubectl(t, "get", "ns")
	status := map[string]string{}
	for _, r := range parseTable(t, out) {
		status[r["NAME"]] = r["STATUS"]
	}
	for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		if status[ns] != "Active" {
			t.Errorf("get ns: %s is %q, want Active\n%s", ns, status[ns], out)
		}
	}
	for _, ns := range []string{"kube-system", "default", "kube-public"} {
		r := s.Kubectl(t, "delete", "ns", ns)
		want := `Error from server (Forbidden): namespaces "` + ns + `" is forbidden: this namespace may not be deleted`
		if r.Err == nil || !strings.Contains(r.Stderr, want) {
			t.Errorf("delete ns %s: %v\nstdout %s\nstderr %s\nwant %s", ns, r.Err, r.Stdout, r.Stderr, want)
		}
	}
	if out := s.MustKubectl(t, "get", "ns", "kube-system", "-o", "jsonpath={.status.phase}"); out != "Active" {
		t.Errorf("kube-system after the refused delete: %q", out)
	}
	s.MustKubectl(t, "delete", "ns", "kube-node-lease")
}

// TestClientGoLeaderElection: two candidates with client-go's LeaseLock (one
// speaking protobuf, one JSON); the second takes over when the first stops.
func TestClientGoLeaderElection(t *testing.T) {
	t.Parallel()
	s := startServer(t)

	type candidate struct {
		cancel  context.CancelFunc
		elected chan struct{}
		stopped chan struct{}
	}
	start := func(id, contentType string) *candidate {
		cfg := s.RESTConfig(t)
		cfg.ContentType = contentType
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		lock := &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: "kube-system", Name: "e2e-election"},
			Client:     cs.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		}
		ctx, cancel := context.WithCancel(t.Context())
		c := &candidate{cancel: cancel, elected: make(chan struct{}), stopped: make(chan struct{})}
		var once sync.Once
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:          lock,
			LeaseDuration: 2 * time.Second,
			RenewDeadline: time.Second,
			RetryPeriod:   200 * time.Millisecond,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) { once.Do(func() { close(c.elected) }) },
				OnStoppedLeading: func() {},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer close(c.stopped)
			le.Run(ctx)
		}()
		t.Cleanup(func() { cancel(); <-c.stopped })
		return c
	}
	wait := func(ch chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(20 * time.Second):
			t.Fatalf("timed out waiting: %s", what)
		}
	}

	first := start("first", "application/vnd.kubernetes.protobuf")
	wait(first.elected, "first elected")
	second := start("second", "application/json")
	select {
	case <-second.elected:
		t.Fatal("second elected while the first leads")
	case <-time.After(3 * time.Second):
	}

	cfg := s.RESTConfig(t)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lease, err := cs.CoordinationV1().Leases("kube-system").Get(t.Context(), "e2e-election", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h == nil || *h != "first" || lease.Spec.RenewTime == nil || lease.Spec.LeaseDurationSeconds == nil || *lease.Spec.LeaseDurationSeconds != 2 {
		t.Fatalf("lease while first leads: %+v", lease.Spec)
	}

	first.cancel() // stops renewing, without releasing the lease
	<-first.stopped
	wait(second.elected, "second takes over")
	lease, err = cs.CoordinationV1().Leases("kube-system").Get(t.Context(), "e2e-election", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h == nil || *h != "second" || lease.Spec.LeaseTransitions == nil || *lease.Spec.LeaseTransitions != 1 {
		t.Errorf("lease after the take-over: %+v", lease.Spec)
	}
	// MicroTime keeps its microseconds through JSON and protobuf.
	micro := metav1.NewMicroTime(time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC))
	lease.Spec.AcquireTime = &micro
	for _, ct := range []string{"application/json", "application/vnd.kubernetes.protobuf"} {
		c := s.RESTConfig(t)
		c.ContentType, c.AcceptContentTypes = ct, ct
		cs, err := kubernetes.NewForConfig(c)
		if err != nil {
			t.Fatal(err)
		}
		l := lease.DeepCopy()
		l.Name, l.Namespace, l.ResourceVersion, l.UID = "micro-"+strings.TrimPrefix(ct, "application/"), "default", "", ""
		l.Name = strings.ReplaceAll(l.Name, "vnd.kubernetes.", "")
		created, err := cs.CoordinationV1().Leases("default").Create(t.Context(), l, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("%s: %v", ct, err)
		}
		if !created.Spec.AcquireTime.Equal(&micro) {
			t.Errorf("%s: acquireTime %v, want %v", ct, created.Spec.AcquireTime, micro)
		}
	}

	// kubectl's Table: NAME, HOLDER, AGE.
	if kubectlBin != "" {
		out := s.MustKubectl(t, "get", "leases", "-n", "kube-system")
		rows := parseTable(t, out)
		if len(rows) != 1 || rows[0]["NAME"] != "e2e-election" || rows[0]["HOLDER"] != "second" || rows[0]["AGE"] == "" {
			t.Errorf("get leases:\n%s", out)
		}
	}
}

// TestClientGoSecretsProtobuf: client-go's typed client reads and writes
// secrets as protobuf; stringData sent as protobuf lands in data.
func TestClientGoSecretsProtobuf(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	cfg := s.RESTConfig(t)
	cfg.ContentType, cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	immutable := true
	created, err := cs.CoreV1().Secrets("default").Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "pb"},
		Type:       corev1.SecretTypeBasicAuth,
		Data:       map[string][]byte{"username": {0, 1, 2}},
		StringData: map[string]string{"password": "pw"},
		Immutable:  &immutable,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(created.Data["username"]) != "\x00\x01\x02" || string(created.Data["password"]) != "pw" || created.StringData != nil ||
		created.Type != corev1.SecretTypeBasicAuth || created.Immutable == nil || !*created.Immutable {
		t.Errorf("created %+v", created)
	}
	created.Data["username"] = []byte("changed")
	if _, err := cs.CoreV1().Secrets("default").Update(t.Context(), created, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), "field is immutable when `immutable` is set") {
		t.Errorf("update of an immutable secret: %v", err)
	}
	list, err := cs.CoreV1().Secrets("default").List(t.Context(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 || string(list.Items[0].Data["password"]) != "pw" {
		t.Errorf("list: %v %+v", err, list)
	}
}

// TestControllerRuntimeLeaderElectionAndEvents: two controller-runtime
// managers with LeaderElection: true (a Lease in kube-system); the second is
// elected when the first stops and releases the lease. Both record events
// with the manager's recorders of either API (GetEventRecorderFor, core v1;
// GetEventRecorder, events.k8s.io/v1) and through leader election: each
// event is seen through both APIs, and repeats are aggregated as the
// recorders do (a count, a series) into one object.
func TestControllerRuntimeLeaderElectionAndEvents(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	cs := clientset(t, s)
	cm, err := cs.CoreV1().ConfigMaps("default").Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "managed"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lease, renew, retry := 2*time.Second, time.Second, 200*time.Millisecond
	start := func() (manager.Manager, context.CancelFunc, chan error) {
		mgr, err := ctrl.NewManager(s.RESTConfig(t), ctrl.Options{
			Metrics:                       metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress:        "0",
			LeaderElection:                true,
			LeaderElectionID:              "e2e-manager",
			LeaderElectionNamespace:       "kube-system",
			LeaderElectionReleaseOnCancel: true,
			LeaseDuration:                 &lease,
			RenewDeadline:                 &renew,
			RetryPeriod:                   &retry,
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- mgr.Start(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		return mgr, cancel, done
	}
	elected := func(mgr manager.Manager, within time.Duration) bool {
		select {
		case <-mgr.Elected():
			return true
		case <-time.After(within):
			return false
		}
	}
	// record has the leader record events about the configmap: one
	// thrice through the core v1 recorder, one twice through the
	// events.k8s.io/v1 recorder.
	record := func(mgr manager.Manager, who string) {
		t.Helper()
		//lint:ignore SA1019 the core v1 recorder is the one most controllers still use
		old := mgr.GetEventRecorderFor("e2e-controller")
		for range 3 {
			old.Eventf(cm, corev1.EventTypeNormal, "Reconciled", "reconciled by the %s manager", who)
		}
		recorder := mgr.GetEventRecorder("e2e-controller")
		note := "drift seen by the " + who + " manager"
		recorder.Eventf(cm, nil, corev1.EventTypeWarning, "Drifted", "Sync", "%s", note)
		// The repeat once the event is stored: a repeat racing the create
		// is sent again only after the recorder's 10 s back-off (client-go
		// does so against any server).
		pollUntil(t, 20*time.Second, "the "+who+" manager's events.k8s.io/v1 event", func() bool {
			return slices.ContainsFunc(eventsV1About(t, cs, "default", cm.Name), func(e eventsv1.Event) bool { return e.Note == note })
		})
		recorder.Eventf(cm, nil, corev1.EventTypeWarning, "Drifted", "Sync", "%s", note)
	}
	first, stopFirst, firstDone := start()
	if !elected(first, 20*time.Second) {
		t.Fatal("the first manager was not elected")
	}
	record(first, "first")
	second, _, _ := start()
	if elected(second, 3*time.Second) {
		t.Fatal("the second manager was elected while the first leads")
	}
	stopFirst()
	if err := <-firstDone; err != nil {
		t.Errorf("first manager: %v", err)
	}
	firstDone <- nil // for the cleanup
	if !elected(second, 20*time.Second) {
		t.Fatal("the second manager was not elected after the first stopped")
	}
	record(second, "second")
	l, err := cs.CoordinationV1().Leases("kube-system").Get(t.Context(), "e2e-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" || l.Spec.LeaseTransitions == nil || *l.Spec.LeaseTransitions != 1 {
		t.Errorf("lease: %+v", l.Spec)
	}

	// Each manager's events about the configmap, aggregated: four objects
	// for ten recordings. The events.k8s.io/v1 recorder sends the second
	// occurrence as a series at once (later ones with its next heartbeat,
	// after 30 minutes).
	summary := func(reason, message string, count int32) string {
		return fmt.Sprintf("%s %q x%d", reason, message, count)
	}
	want := []string{
		summary("Drifted", "drift seen by the first manager", 2), summary("Drifted", "drift seen by the second manager", 2),
		summary("Reconciled", "reconciled by the first manager", 3), summary("Reconciled", "reconciled by the second manager", 3),
	}
	var core []string
	defer func() {
		if t.Failed() {
			t.Logf("core v1 events about the configmap: %q", core)
		}
	}()
	pollUntil(t, 20*time.Second, "the managers' events about the configmap", func() bool {
		evs, err := cs.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.kind=ConfigMap,involvedObject.name=managed,involvedObject.uid=" + string(cm.UID)})
		if err != nil {
			t.Fatal(err)
		}
		core = core[:0]
		for _, e := range evs.Items {
			n := e.Count
			if e.Series != nil {
				n = e.Series.Count
			}
			core = append(core, summary(e.Reason, e.Message, n))
		}
		slices.Sort(core)
		return slices.Equal(core, want)
	})
	v1, err := cs.EventsV1().Events("default").List(t.Context(), metav1.ListOptions{FieldSelector: "regarding.name=managed,reportingController=e2e-controller"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range v1.Items {
		n := e.DeprecatedCount
		if e.Series != nil {
			n = e.Series.Count
		}
		got = append(got, summary(e.Reason, e.Note, n))
		if e.Regarding.UID != cm.UID || e.Regarding.Kind != "ConfigMap" {
			t.Errorf("events.k8s.io/v1 event %s regards %+v", e.Name, e.Regarding)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("events.k8s.io/v1 view: %q, want %q", got, want)
	}

	// Leader election's own events: each manager became leader.
	var leaders []string
	pollUntil(t, 20*time.Second, "both managers' LeaderElection events on the lease", func() bool {
		evs, err := cs.EventsV1().Events("kube-system").List(t.Context(), metav1.ListOptions{FieldSelector: "regarding.kind=Lease,regarding.name=e2e-manager,reason=LeaderElection"})
		if err != nil {
			t.Fatal(err)
		}
		leaders = leaders[:0]
		for _, e := range evs.Items {
			if id, ok := strings.CutSuffix(e.Note, " became leader"); ok {
				leaders = append(leaders, id)
			}
		}
		return len(leaders) == 2
	})
	if leaders[0] == leaders[1] || !slices.Contains(leaders, *l.Spec.HolderIdentity) {
		t.Errorf("became-leader events of %q; the lease is held by %q", leaders, *l.Spec.HolderIdentity)
	}
	if kubectlBin != "" {
		out := s.MustKubectl(t, "describe", "lease", "e2e-manager", "-n", "kube-system")
		for _, id := range leaders {
			wantEventLine(t, "kubectl describe lease", out, "Normal", "LeaderElection", `\S+`, id, id+" became leader")
		}
	}
}
