package e2e

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"
)

// recorders are client-go's two event recorders against one server: the
// core v1 one of tools/record (what most controllers use, and
// controller-runtime's GetEventRecorderFor) and the events.k8s.io/v1 one of
// tools/events. Both are shut down when the test ends.
type recorders struct {
	core record.EventRecorder // source.component "kapi-e2e"
	v1   events.EventRecorder // reportingController "kapi-e2e-ctl"
}

func startRecorders(t *testing.T, cs kubernetes.Interface) recorders {
	t.Helper()
	cb := record.NewBroadcaster()
	cb.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	ctx, cancel := context.WithCancel(context.Background())
	vb := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	if err := vb.StartRecordingToSinkWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); vb.Shutdown(); cb.Shutdown() })
	return recorders{
		core: cb.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kapi-e2e"}),
		v1:   vb.NewRecorder(scheme.Scheme, "kapi-e2e-ctl"),
	}
}

func clientset(t *testing.T, s *server) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// startEventsServer starts a server for a kubectl events test, with a
// client-go clientset and the namespace ns.
func startEventsServer(t *testing.T, ns string) (*server, *kubernetes.Clientset, *corev1.Namespace) {
	t.Helper()
	needKubectl(t)
	s := startServer(t)
	cs := clientset(t, s)
	nsObj, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s, cs, nsObj
}

// wantMatches checks that out matches each of the regular expressions res.
func wantMatches(t *testing.T, what, out string, res ...string) {
	t.Helper()
	for _, re := range res {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("%s: no match for %s in:\n%s", what, re, out)
		}
	}
}

// waitEvents polls the core v1 events of ns until cond holds of them.
func waitEvents(t *testing.T, cs kubernetes.Interface, ns, what string, cond func([]corev1.Event) bool) []corev1.Event {
	t.Helper()
	var items []corev1.Event
	pollUntil(t, 20*time.Second, what, func() bool {
		l, err := cs.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list events in %s: %v", ns, err)
		}
		items = l.Items
		return cond(items)
	})
	return items
}

// eventsAbout are the events in evs whose involvedObject is name.
func eventsAbout(evs []corev1.Event, name string) []corev1.Event {
	var out []corev1.Event
	for _, e := range evs {
		if e.InvolvedObject.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// eventsSection is the Events section of kubectl describe's output.
func eventsSection(out string) string {
	i := strings.Index(out, "\nEvents:")
	if i < 0 {
		return ""
	}
	return out[i+1:]
}

// wantEventLine checks that the Events section of a kubectl describe output
// has a row with typ, reason, an age matching age, from and message.
func wantEventLine(t *testing.T, what, out, typ, reason, age, from, message string) {
	t.Helper()
	re := `(?m)^\s+` + typ + `\s+` + reason + `\s+` + age + `\s+` + regexp.QuoteMeta(from) + `\s+` + regexp.QuoteMeta(message) + `$`
	if !regexp.MustCompile(re).MatchString(eventsSection(out)) {
		t.Errorf("%s: no event row %s %s %s %s %q in:\n%s", what, typ, reason, age, from, message, out)
	}
}

// TestKubectlDescribeShowsEvents: kubectl describe of every type the
// quickstart serves lists the events client-go's recorders wrote about the
// object (both recorders, and an aggregated one with its count), as it does
// against kube-apiserver; before events were served, describe failed on
// their list with NotFound.
func TestKubectlDescribeShowsEvents(t *testing.T) {
	t.Parallel()
	const ns = "describe"
	s, cs, nsObj := startEventsServer(t, ns)
	ctx := t.Context()
	cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"mode": "fast"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secret, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "token"}, StringData: map[string]string{"key": "value"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	holder := "someone"
	lease, err := cs.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "lock"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wd, err := s.Dynamic(t).Resource(widgetsGVR).Namespace(ns).Create(ctx, widget(t, ns, "gadget", 3), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	rec := startRecorders(t, cs)
	objects := []struct {
		resource, kind, name string
		obj                  runtime.Object
	}{
		{"configmap", "ConfigMap", cm.Name, cm},
		{"secret", "Secret", secret.Name, secret},
		{"lease", "Lease", lease.Name, lease},
		{"widget", "Widget", wd.GetName(), wd},
		{"namespace", "Namespace", nsObj.Name, nsObj},
	}
	for _, o := range objects {
		rec.core.Eventf(o.obj, corev1.EventTypeNormal, "Made", "made %s %s", o.kind, o.name)
		rec.v1.Eventf(o.obj, nil, corev1.EventTypeWarning, "Checked", "Check", "checked %s %s", o.kind, o.name)
	}
	// Both recorders aggregate repeats into one event: the core one with a
	// count, the events.k8s.io/v1 one with a series. (The latter's repeat
	// once the event is stored: one racing the create is sent again only
	// after the recorder's 10 s back-off.)
	waitEvents(t, cs, ns, "the first events", func(evs []corev1.Event) bool { return len(evs) == 8 })
	rec.core.Eventf(cm, corev1.EventTypeNormal, "Made", "made %s %s", "ConfigMap", cm.Name)
	rec.core.Eventf(cm, corev1.EventTypeNormal, "Made", "made %s %s", "ConfigMap", cm.Name)
	rec.v1.Eventf(cm, nil, corev1.EventTypeWarning, "Checked", "Check", "checked %s %s", "ConfigMap", cm.Name)

	// Events about the namespace, a cluster-scoped object, are in default.
	waitEvents(t, cs, "default", "the events about the namespace", func(evs []corev1.Event) bool { return len(eventsAbout(evs, ns)) == 2 })
	evs := waitEvents(t, cs, ns, "the events about the namespaced objects", func(evs []corev1.Event) bool {
		about := eventsAbout(evs, cm.Name)
		return len(evs) == 8 && slices.ContainsFunc(about, func(e corev1.Event) bool { return e.Count == 3 }) &&
			slices.ContainsFunc(about, func(e corev1.Event) bool { return e.Series != nil && e.Series.Count == 2 })
	})

	for _, o := range objects {
		args := []string{"describe", o.resource, o.name}
		if o.resource != "namespace" {
			args = append(args, "-n", ns)
		}
		out := s.MustKubectl(t, args...)
		wantMatches(t, "kubectl describe "+o.resource, out, `(?m)^Name:\s+`+o.name+`$`)
		switch o.resource {
		case "secret", "namespace":
			// kubectl's describers of secrets and namespaces list no
			// events, whatever the server (k8s.io/kubectl/pkg/describe):
			// kubectl events --for shows them (TestKubectlEvents).
			if strings.Contains(out, "Events:") {
				t.Errorf("kubectl describe %s: an Events section kubectl does not print:\n%s", o.resource, out)
			}
			continue
		}
		what := "kubectl describe " + o.resource
		made, checked := `\S+`, `\S+`
		if o.resource == "configmap" {
			made, checked = `\S+ \(x3 over \S+\)`, `\S+ \(x2 over \S+\)`
		}
		wantEventLine(t, what, out, "Normal", "Made", made, "kapi-e2e", "made "+o.kind+" "+o.name)
		wantEventLine(t, what, out, "Warning", "Checked", checked, "kapi-e2e-ctl", "checked "+o.kind+" "+o.name)
		if n := strings.Count(eventsSection(out), "\n") - 3; n != 2 {
			t.Errorf("%s: %d event rows, want 2:\n%s", what, n, out)
		}
	}

	// An event itself: kubectl's generic describer shows its fields (and
	// the events about it: none), through either API.
	var made corev1.Event
	for _, e := range eventsAbout(evs, lease.Name) {
		if e.Reason == "Made" {
			made = e
		}
	}
	wantMatches(t, "kubectl describe event", s.MustKubectl(t, "describe", "event", made.Name, "-n", ns),
		`(?m)^Reason:\s+Made$`, `(?m)^Message:\s+made Lease lock$`, `(?m)^Involved Object:$`, `(?m)^  Kind:\s+Lease$`, `(?m)^Count:\s+1$`, `(?m)^Events:\s+<none>$`)
	wantMatches(t, "kubectl describe events.events.k8s.io", s.MustKubectl(t, "describe", "events.events.k8s.io", made.Name, "-n", ns),
		`(?m)^API Version:\s+events.k8s.io/v1$`, `(?m)^Note:\s+made Lease lock$`, `(?m)^Regarding:$`, `(?m)^Deprecated Count:\s+1$`, `(?m)^Events:\s+<none>$`)
}

// TestKubectlEvents: kubectl events (with --for and --types), kubectl get
// events with field selectors, get -w as events are recorded, and get
// events.events.k8s.io, over events written by client-go's recorders.
func TestKubectlEvents(t *testing.T) {
	t.Parallel()
	const ns = "kev"
	s, cs, _ := startEventsServer(t, ns)
	ctx := t.Context()
	var cms []*corev1.ConfigMap
	for _, name := range []string{"alpha", "beta"} {
		cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cms = append(cms, cm)
	}
	secret, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec := startRecorders(t, cs)
	rec.core.Event(cms[0], corev1.EventTypeNormal, "Synced", "alpha is in sync")
	rec.core.Event(cms[1], corev1.EventTypeWarning, "Invalid", "beta has a bad key")
	rec.v1.Eventf(cms[1], nil, corev1.EventTypeNormal, "Resolved", "Resolve", "beta fixed")
	rec.v1.Eventf(secret, nil, corev1.EventTypeWarning, "Rotated", "Rotate", "creds rotated")
	waitEvents(t, cs, ns, "4 events", func(evs []corev1.Event) bool { return len(evs) == 4 })

	// rows runs kubectl and returns the rows of its table as
	// "TYPE REASON OBJECT MESSAGE", sorted.
	rows := func(args ...string) []string {
		t.Helper()
		out := s.MustKubectl(t, args...)
		var got []string
		for _, r := range parseTable(t, out) {
			got = append(got, r["TYPE"]+" "+r["REASON"]+" "+r["OBJECT"]+" "+r["MESSAGE"])
		}
		slices.Sort(got)
		return got
	}
	check := func(got []string, want ...string) {
		t.Helper()
		want = slices.Sorted(slices.Values(want))
		if !slices.Equal(got, want) {
			t.Errorf("got rows\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
		}
	}
	const (
		alphaSynced  = "Synced configmap/alpha alpha is in sync"
		betaInvalid  = "Invalid configmap/beta beta has a bad key"
		betaResolved = "Resolved configmap/beta beta fixed"
		credsRotated = "Rotated secret/creds creds rotated"
	)
	// kubectl events names the kind as it is (ConfigMap/alpha); kubectl get,
	// from the server's Table, in lower case (configmap/alpha).
	upper := func(rows ...string) []string {
		out := make([]string, len(rows))
		for i, r := range rows {
			out[i] = strings.NewReplacer("configmap/", "ConfigMap/", "secret/", "Secret/").Replace(r)
		}
		return out
	}

	check(rows("events", "-n", ns), upper("Normal "+alphaSynced, "Normal "+betaResolved, "Warning "+betaInvalid, "Warning "+credsRotated)...)
	check(rows("events", "-n", ns, "--for", "configmap/beta"), upper("Normal "+betaResolved, "Warning "+betaInvalid)...)
	check(rows("events", "-n", ns, "--for", "secret/creds"), upper("Warning "+credsRotated)...)
	check(rows("events", "-n", ns, "--types", "Warning"), upper("Warning "+betaInvalid, "Warning "+credsRotated)...)
	if out := s.MustKubectl(t, "events", "-n", ns); !strings.HasPrefix(out, "LAST SEEN") {
		t.Errorf("kubectl events: header %q", strings.SplitN(out, "\n", 2)[0])
	}

	check(rows("get", "events", "-n", ns), "Normal "+alphaSynced, "Normal "+betaResolved, "Warning "+betaInvalid, "Warning "+credsRotated)
	check(rows("get", "events", "-n", ns, "--field-selector", "involvedObject.name=beta"), "Normal "+betaResolved, "Warning "+betaInvalid)
	check(rows("get", "ev", "-n", ns, "--field-selector", "type=Warning"), "Warning "+betaInvalid, "Warning "+credsRotated)
	check(rows("get", "events", "-n", ns, "--field-selector", "involvedObject.kind=ConfigMap,type=Normal"), "Normal "+alphaSynced, "Normal "+betaResolved)
	check(rows("get", "events", "-n", ns, "--field-selector", "reason=Invalid"), "Warning "+betaInvalid)
	check(rows("get", "events", "-n", ns, "--field-selector", "source=kapi-e2e"), "Normal "+alphaSynced, "Warning "+betaInvalid)
	check(rows("get", "events", "-n", ns, "--field-selector", "reportingComponent=kapi-e2e-ctl"), "Normal "+betaResolved, "Warning "+credsRotated)
	check(rows("get", "events", "-n", ns, "--field-selector", "involvedObject.name!=beta"), "Normal "+alphaSynced, "Warning "+credsRotated)

	// The events.k8s.io/v1 view of the same events, with its own field names.
	check(rows("get", "events.events.k8s.io", "-n", ns), "Normal "+alphaSynced, "Normal "+betaResolved, "Warning "+betaInvalid, "Warning "+credsRotated)
	check(rows("get", "events.events.k8s.io", "-n", ns, "--field-selector", "regarding.name=beta,type=Warning"), "Warning "+betaInvalid)
	check(rows("get", "events.events.k8s.io", "-n", ns, "--field-selector", "reportingController=kapi-e2e-ctl"), "Normal "+betaResolved, "Warning "+credsRotated)
	wide := parseTable(t, s.MustKubectl(t, "get", "events.events.k8s.io", "-n", ns, "-o", "wide", "--field-selector", "regarding.name=alpha"))
	if len(wide) != 1 || wide[0]["SOURCE"] != "kapi-e2e" || wide[0]["COUNT"] != "1" || !strings.HasPrefix(wide[0]["NAME"], "alpha.") {
		t.Errorf("get events.events.k8s.io -o wide: %v", wide)
	}
	if out := s.MustKubectl(t, "get", "events.events.k8s.io", "-n", ns, "--field-selector", "regarding.name=alpha", "-o", "jsonpath={.items[0].note}/{.items[0].regarding.kind}/{.items[0].deprecatedSource.component}"); out != "alpha is in sync/ConfigMap/kapi-e2e" {
		t.Errorf("get events.events.k8s.io -o jsonpath: %q", out)
	}

	// kubectl get events -w prints what is recorded while it watches.
	expect := kubectlStream(t, s, "get", "events", "-n", ns, "-w")
	expect(`^LAST SEEN\s+TYPE\s+REASON\s+OBJECT\s+MESSAGE$`)
	for range 4 {
		expect(`^\S+\s+(Normal|Warning)\s+\S+\s+\S+\s+.+$`) // the events listed first
	}
	rec.core.Event(cms[0], corev1.EventTypeWarning, "Drifted", "alpha drifted")
	expect(`^\S+\s+Warning\s+Drifted\s+configmap/alpha\s+alpha drifted$`)
	rec.v1.Eventf(cms[0], nil, corev1.EventTypeNormal, "Repaired", "Repair", "alpha repaired")
	expect(`^\S+\s+Normal\s+Repaired\s+configmap/alpha\s+alpha repaired$`)
}

// TestEventsExpire: with --event-ttl, events are deleted TTL after their
// last write, written through either API; a write in between (a recorder's
// repeat) keeps an event longer; other objects stay.
func TestEventsExpire(t *testing.T) {
	t.Parallel()
	const ttl = 5 * time.Second
	s := startServerWith(t, serverOptions{args: []string{"--event-ttl", ttl.String()}})
	cs := clientset(t, s)
	ctx := t.Context()
	const ns = "default"
	cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "short-lived"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec := startRecorders(t, cs)
	start := time.Now()
	rec.core.Event(cm, corev1.EventTypeNormal, "Once", "recorded once")
	rec.core.Event(cm, corev1.EventTypeNormal, "Again", "recorded again later")
	rec.v1.Eventf(cm, nil, corev1.EventTypeWarning, "New", "Check", "through events.k8s.io")
	waitEvents(t, cs, ns, "3 events", func(evs []corev1.Event) bool { return len(evs) == 3 })
	if kubectlBin != "" {
		if rows := parseTable(t, s.MustKubectl(t, "get", "events")); len(rows) != 3 {
			t.Errorf("kubectl get events: %d rows, want 3: %v", len(rows), rows)
		}
	}

	// Half a TTL later, the repeat (a patch of count) writes "Again" anew:
	// it expires a TTL after that write, later than the others.
	time.Sleep(time.Until(start.Add(ttl / 2)))
	rec.core.Event(cm, corev1.EventTypeNormal, "Again", "recorded again later")
	waitEvents(t, cs, ns, "the repeat", func(evs []corev1.Event) bool {
		return slices.ContainsFunc(evs, func(e corev1.Event) bool { return e.Reason == "Again" && e.Count == 2 })
	})

	// One list sees the others gone and "Again" still there.
	evs := waitEvents(t, cs, ns, "the events written once to expire", func(evs []corev1.Event) bool {
		return !slices.ContainsFunc(evs, func(e corev1.Event) bool { return e.Reason != "Again" })
	})
	if len(evs) != 1 || evs[0].Count != 2 {
		t.Errorf("when the events written once had expired (%s after they were): %+v, want the repeated one", time.Since(start).Round(time.Millisecond), evs)
	}
	if d := time.Since(start); d < ttl {
		t.Errorf("the events expired %s after they were written, before their TTL of %s", d, ttl)
	}
	waitEvents(t, cs, ns, "the repeated event to expire", func(evs []corev1.Event) bool { return len(evs) == 0 })
	v1list, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(v1list.Items) != 0 {
		t.Errorf("events.k8s.io list after expiry: %v %v", err, v1list)
	}
	if kubectlBin != "" {
		r := s.Kubectl(t, "get", "events")
		if r.Err != nil || r.Stdout != "" || strings.TrimSpace(r.Stderr) != "No resources found in default namespace." {
			t.Errorf("kubectl get events after expiry: %v\nstdout %q\nstderr %q", r.Err, r.Stdout, r.Stderr)
		}
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, cm.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the configmap the events were about: %v", err)
	}
}

// eventsV1About lists the events.k8s.io/v1 events of ns about name.
func eventsV1About(t *testing.T, cs kubernetes.Interface, ns, name string) []eventsv1.Event {
	t.Helper()
	l, err := cs.EventsV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: "regarding.name=" + name})
	if err != nil {
		t.Fatalf("list events.k8s.io/v1 events about %s: %v", name, err)
	}
	return l.Items
}
