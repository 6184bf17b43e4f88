package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/apiserver/auth"
	"github.com/kapi-dev/kapi/meta"
)

// listNames lists path and returns the names, in the list's order.
func listNames(t *testing.T, ts *httptest.Server, path string) []string {
	t.Helper()
	r := do(t, ts, "GET", path, "")
	var list struct {
		Items []struct {
			Metadata struct{ Name string } `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal(r.body, &list); err != nil || r.code != 200 {
		t.Fatalf("list %s: %d %s", path, r.code, r.body)
	}
	var names []string
	for _, it := range list.Items {
		names = append(names, it.Metadata.Name)
	}
	return names
}

// A deletecollection whose query does not parse, in whole or in part,
// deletes nothing: url.Values would drop the malformed selector and the
// request would widen to the whole namespace.
func TestDeleteCollectionRefusesMalformedQuery(t *testing.T) {
	_, ts := newTestServer(t)
	do(t, ts, "POST", cmPath, `{"metadata":{"name":"keep","labels":{"app":"other"}}}`)
	do(t, ts, "POST", cmPath, `{"metadata":{"name":"target","labels":{"app":"x"}}}`)
	for _, q := range []string{
		"labelSelector=%zz",
		"labelSelector=app%3Dx&fieldSelector=%zz",
		"x=%zz&labelSelector=app%3Dx",
		"labelSelector=app%3Dx;fieldSelector=metadata.name%3Dtarget", // ';' is no separator
		"labelSelector=app%3Dx&gracePeriodSeconds=soon",
		"labelSelector=app%3Dx&gracePeriodSeconds=",
		"labelSelector=app%3Dx&orphanDependents=maybe",
		"labelSelector=app%3Dx&timeoutSeconds=abc",
		"labelSelector=app%3Dx&limit=many",
		"labelSelector=app%3Dx&pretty=very",
	} {
		do(t, ts, "DELETE", cmPath+"?"+q, "").status(t, 400, meta.StatusReasonBadRequest)
	}
	if got := listNames(t, ts, cmPath); strings.Join(got, ",") != "keep,target" {
		t.Fatalf("after refused deletecollections: %v", got)
	}
	// A well-formed one deletes what it selects, and only that.
	if r := do(t, ts, "DELETE", cmPath+"?labelSelector=app%3Dx&orphanDependents=false", ""); r.code != 200 {
		t.Fatalf("deletecollection: %d %s", r.code, r.body)
	}
	if got := listNames(t, ts, cmPath); strings.Join(got, ",") != "keep" {
		t.Fatalf("after deletecollection: %v", got)
	}
}

// Every parameter the server reads is read as its type: a value that does
// not read is 400 (kube-apiserver: 400 for integers), never dropped.
func TestQueryValuesMustParse(t *testing.T) {
	_, ts := newTestServer(t)
	do(t, ts, "POST", cmPath, `{"metadata":{"name":"c"}}`)
	for _, c := range []struct{ method, path string }{
		{"GET", cmPath + "?timeoutSeconds=abc"},
		{"GET", cmPath + "?timeoutSeconds="},
		{"GET", cmPath + "?limit=abc"},
		{"GET", cmPath + "?limit="},
		{"GET", cmPath + "?allowWatchBookmarks=yes"},
		{"GET", cmPath + "?watch=yes"},
		{"GET", cmPath + "/c?watch=yes"},
		{"GET", cmPath + "?watch=1&sendInitialEvents=maybe&resourceVersionMatch=NotOlderThan"},
		{"GET", cmPath + "?labelSelector=a%3D%3D%3Db"},
		{"GET", cmPath + "?fieldSelector=%zz"},
		{"GET", cmPath + "/c?pretty=very"},
		{"GET", cmPath + "/c?resourceVersion=%zz"},
		{"DELETE", cmPath + "/c?gracePeriodSeconds=now"},
		{"DELETE", cmPath + "/c?orphanDependents=yes"},
		{"POST", cmPath + "?dryRun=All&x=%"},
	} {
		r := do(t, ts, c.method, c.path, `{"metadata":{"name":"n"}}`)
		r.status(t, 400, meta.StatusReasonBadRequest)
	}
	// PATCH's force.
	do(t, ts, "PATCH", cmPath+"/c?fieldManager=m&force=maybe", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`,
		"Content-Type", applyPatchType).status(t, 400, meta.StatusReasonBadRequest)
	if r := do(t, ts, "GET", cmPath+"/c", ""); r.code != 200 {
		t.Fatalf("the refused requests changed c: %d %s", r.code, r.body)
	}
}

// A watch has nothing to continue: kube-apiserver answers 422.
func TestWatchRefusesContinue(t *testing.T) {
	_, ts := newTestServer(t)
	st := do(t, ts, "GET", cmPath+"?watch=true&continue=abc&timeoutSeconds=2", "").status(t, 422, meta.StatusReasonInvalid)
	if !strings.Contains(st.Message, "continue") {
		t.Fatalf("message %q does not name continue", st.Message)
	}
}

// The values real clients send, and kube-apiserver's readings of booleans
// (case-insensitive true/false, 1/0, a bare ?watch), keep working.
func TestQueryValuesClientsSend(t *testing.T) {
	_, ts := newTestServer(t)
	do(t, ts, "POST", cmPath, `{"metadata":{"name":"c"}}`)
	for _, q := range []string{"watch=true", "watch=1", "watch=TRUE", "watch", "watch=",
		"watch=true&allowWatchBookmarks=true&resourceVersion=0&timeoutSeconds=30",
		"watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"} {
		ws := startWatch(t, ts, cmPath+"?"+q)
		if ev := ws.next(t); ev["type"] != "ADDED" {
			t.Fatalf("%s: first event %v", q, ev)
		}
	}
	for _, q := range []string{"watch=false", "watch=0", "watch=False", "limit=500", "limit=500&labelSelector=a%3Db&fieldSelector=metadata.name%3Dc",
		"pretty=true", "pretty=1", "pretty=", "allowWatchBookmarks=false", "timeoutSeconds=5"} {
		r := do(t, ts, "GET", cmPath+"?"+q, "")
		if r.code != 200 || str(r.object(t), "kind") != "ConfigMapList" {
			t.Fatalf("%s: %d %s", q, r.code, r.body)
		}
	}
	for _, q := range []string{"fieldManager=kubectl&force=true", "fieldManager=kubectl&force=false", "fieldManager=kubectl&force=True&fieldValidation=Strict"} {
		r := do(t, ts, "PATCH", cmPath+"/c?"+q, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`, "Content-Type", applyPatchType)
		if r.code != 200 {
			t.Fatalf("apply %s: %d %s", q, r.code, r.body)
		}
	}
	if r := do(t, ts, "DELETE", cmPath+"/c?gracePeriodSeconds=0&orphanDependents=true", ""); r.code != 200 {
		t.Fatalf("delete: %d %s", r.code, r.body)
	}
}

func TestReadBool(t *testing.T) {
	for v, want := range map[string]bool{"": true, "1": true, "true": true, "True": true, "TRUE": true, "0": false, "false": false, "FALSE": false} {
		if b, ok := readBool(v); !ok || b != want {
			t.Errorf("readBool(%q) = %v, %v; want %v", v, b, ok, want)
		}
	}
	for _, v := range []string{"t", "f", "yes", "no", "2", " true", "true "} {
		if _, ok := readBool(v); ok {
			t.Errorf("readBool(%q) accepted", v)
		}
	}
}

// kubeBool is how kube-apiserver converts a query value to a bool
// (Convert_Slice_string_To_bool): only "0" and "false" in any case are
// false.
func kubeBool(v string) bool { return v != "0" && !strings.EqualFold(v, "false") }

// FuzzQuery: whatever the query string, parsing it never panics, a query
// url.ParseQuery accepts is read alike, and a boolean kapi accepts reads as
// kube-apiserver reads it.
func FuzzQuery(f *testing.F) {
	for _, s := range []string{"", "watch=true", "labelSelector=%zz", "a=1;b=2", "watch&limit=5", "watch=FaLsE", "force=%00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		r := &http.Request{URL: &url.URL{RawQuery: raw}}
		st := &requestState{}
		q, err := st.queryValues(r)
		want, werr := url.ParseQuery(raw)
		if (err == nil) != (werr == nil) || (raw != "" && len(q) != len(want)) {
			t.Fatalf("%q: %v, %v; url.ParseQuery %v, %v", raw, q, err, want, werr)
		}
		for name, vs := range q {
			if b, ok := readBool(vs[0]); ok && b != kubeBool(vs[0]) {
				t.Fatalf("%s=%q reads %v, kube-apiserver %v", name, vs[0], b, !b)
			}
			if _, _, err := queryInt(q, name); err != nil && meta.ReasonOf(err) != meta.StatusReasonBadRequest {
				t.Fatalf("queryInt error %v", err)
			}
		}
	})
}

// A list or watch whose fieldSelector pins metadata.name is authorized as a
// request for that name, as kube-apiserver's RequestInfo does: a grant of
// get/list/watch on one resourceName covers `kubectl get cm NAME --watch`,
// and nothing more.
func TestSelectedNameAuthorized(t *testing.T) {
	ts := securedServer(t, nil, func(c *Config) {
		authz, err := auth.RBAC(&auth.Policy{
			Roles: []auth.Role{{Name: "one-cm", Namespace: "team", Rules: []auth.Rule{
				{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"visible"}, Verbs: []string{"get", "list", "watch"}},
			}}},
			Bindings: []auth.Binding{{Name: "one", Namespace: "team", Role: "one-cm", Users: []string{"nobody"}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		c.Authorizer = authz
	})
	teamCM := "/api/v1/namespaces/team/configmaps"
	admin, nobody := bearer("admin-token"), bearer("nobody-token")
	for _, n := range []string{"visible", "hidden"} {
		if r := do(t, ts, "POST", teamCM, fmt.Sprintf(`{"metadata":{"name":%q}}`, n), admin...); r.code != 201 {
			t.Fatalf("create %s: %d %s", n, r.code, r.body)
		}
	}
	sel := "fieldSelector=metadata.name%3Dvisible"
	r := do(t, ts, "GET", teamCM+"?"+sel, "", nobody...)
	if r.code != 200 || !strings.Contains(string(r.body), `"visible"`) || strings.Contains(string(r.body), `"hidden"`) {
		t.Fatalf("list pinned to visible: %d %s", r.code, r.body)
	}
	ws := startWatchAs(t, ts, teamCM+"?watch=true&"+sel, "nobody-token")
	if ev := ws.next(t); ev["type"] != "ADDED" || str(ev, "object", "metadata", "name") != "visible" {
		t.Fatalf("watch pinned to visible: %v", ev)
	}
	for _, q := range []string{"", "?watch=true", "?fieldSelector=metadata.name%3Dhidden", "?watch=1&fieldSelector=metadata.name%3Dhidden",
		"?fieldSelector=metadata.name!%3Dvisible", "?fieldSelector=metadata.name%3Dvisible%2Cmetadata.name%3Dhidden"} {
		do(t, ts, "GET", teamCM+q, "", nobody...).status(t, 403, meta.StatusReasonForbidden)
	}
	// A deletecollection is not narrowed so: it stays a collection request.
	do(t, ts, "DELETE", teamCM+"?"+sel, "", nobody...).status(t, 403, meta.StatusReasonForbidden)
}
