package apiserver

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/meta"
)

// Query parameters. A resource request's query string is parsed once
// (requestState.queryValues) and every parameter the server reads is read
// strictly: a query string that does not parse, or a value that does not
// read as its type, is a 400 instead of being dropped, so that no request
// (a deletecollection least of all) acts on less than it said.

// queryValues returns r's query, parsed on first use and kept: nil for an
// empty query (no allocation), and with it the error of a query string that
// does not parse (the pairs that did parse are returned too).
func (st *requestState) queryValues(r *http.Request) (url.Values, error) {
	if !st.queryDone {
		st.queryDone = true
		if r.URL.RawQuery != "" {
			st.query, st.queryErr = url.ParseQuery(r.URL.RawQuery)
		}
	}
	return st.query, st.queryErr
}

// queryOf is r's query (see queryValues): nil when there is none, since
// url.Values reads work on nil. A query that does not parse has been
// answered 400 by serveResource before any handler reads it.
func queryOf(r *http.Request) url.Values {
	q, _ := stateOf(r).queryValues(r)
	return q
}

// badQuery is the answer to a query string that does not parse.
func badQuery(err error) error {
	return meta.NewBadRequest(fmt.Sprintf("the query string could not be parsed: %v", err))
}

// readBool reads a boolean value as kube-apiserver does: "0" and "false"
// (any case) are false; "1", "true" (any case) and an empty value (a bare
// ?watch) are true. kube-apiserver also reads every other value as true;
// ok is false for those, which kapi refuses rather than guess.
func readBool(v string) (b, ok bool) {
	switch {
	case v == "" || v == "1" || strings.EqualFold(v, "true"):
		return true, true
	case v == "0" || strings.EqualFold(v, "false"):
		return false, true
	}
	return false, false
}

// queryBool reads the boolean parameter name (its first value); absent is
// false.
func queryBool(q url.Values, name string) (value, present bool, err error) {
	vs := q[name]
	if len(vs) == 0 {
		return false, false, nil
	}
	b, ok := readBool(vs[0])
	if !ok {
		return false, true, meta.NewBadRequest(fmt.Sprintf("invalid %s %q: must be a boolean (true or false)", name, vs[0]))
	}
	return b, true, nil
}

// queryTrue says whether the boolean parameter name reads as true; a value
// that does not read is false here (the handler refuses it).
func queryTrue(q url.Values, name string) bool {
	b, _, err := queryBool(q, name)
	return b && err == nil
}

// queryInt reads the integer parameter name (its first value). An empty
// value is not an integer, as for kube-apiserver.
func queryInt(q url.Values, name string) (value int64, present bool, err error) {
	vs := q[name]
	if len(vs) == 0 {
		return 0, false, nil
	}
	n, perr := strconv.ParseInt(vs[0], 10, 64)
	if perr != nil {
		return 0, true, meta.NewBadRequest(fmt.Sprintf("invalid %s %q: must be an integer", name, vs[0]))
	}
	return n, true, nil
}

// checkPretty refuses a pretty value that is not a boolean. kube-apiserver
// reads it with strconv.ParseBool and ignores what does not parse; empty
// leaves the choice to the media type and client (wantPretty).
func checkPretty(q url.Values) error {
	if v := q.Get("pretty"); v != "" {
		if _, err := strconv.ParseBool(v); err != nil {
			return meta.NewBadRequest(fmt.Sprintf("invalid pretty %q: must be a boolean (true or false)", v))
		}
	}
	return nil
}

// selectedName is the name a list or watch whose fieldSelector pins
// metadata.name=NAME is about, "" for any other: kube-apiserver authorizes
// such a request as one for that name (RequestInfo.Name), so that a grant
// limited to resourceNames covers `kubectl get NAME --watch`. A name that
// could not be a path segment is not used, as there.
func selectedName(q url.Values, info requestInfo) string {
	if info.Name != "" || (info.Verb != "list" && info.Verb != "watch") {
		return ""
	}
	fs := q.Get("fieldSelector")
	if !strings.Contains(fs, "metadata.name") {
		return ""
	}
	sel, err := meta.ParseFieldSelector(fs)
	if err != nil {
		return ""
	}
	name, ok := sel.RequiresExactMatch("metadata.name")
	if !ok || name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/%") {
		return ""
	}
	return name
}

// listQuery is what a list, watch or deletecollection reads from its query.
type listQuery struct {
	opts              registry.ListOptions
	timeoutSeconds    int64 // 0: none
	allowBookmarks    bool
	sendInitialEvents *bool
}

// listOptions reads the list query parameters (ListOptions), each of which
// must read as its type, as kube-apiserver decodes them for these verbs.
func (s *Server) listOptions(q url.Values, st *registry.Store) (listQuery, error) {
	lq := listQuery{opts: registry.ListOptions{
		Continue:             q.Get("continue"),
		ResourceVersion:      q.Get("resourceVersion"),
		ResourceVersionMatch: q.Get("resourceVersionMatch"),
	}}
	if len(q) == 0 {
		return lq, nil
	}
	n, _, err := queryInt(q, "limit")
	if err != nil {
		return lq, err
	}
	lq.opts.Limit = max(n, 0)
	if lq.timeoutSeconds, _, err = queryInt(q, "timeoutSeconds"); err != nil {
		return lq, err
	}
	if lq.allowBookmarks, _, err = queryBool(q, "allowWatchBookmarks"); err != nil {
		return lq, err
	}
	if b, present, err := queryBool(q, "sendInitialEvents"); err != nil {
		return lq, err
	} else if present {
		lq.sendInitialEvents = &b
	}
	if _, _, err := queryBool(q, "watch"); err != nil {
		return lq, err
	}
	if err := selectors(q, st, &lq.opts); err != nil {
		return lq, err
	}
	return lq, nil
}

// selectors reads labelSelector and fieldSelector into opts.
func selectors(q url.Values, st *registry.Store, opts *registry.ListOptions) error {
	if ls := q.Get("labelSelector"); ls != "" {
		sel, err := meta.ParseLabelSelector(ls)
		if err != nil {
			return meta.NewBadRequest(fmt.Sprintf("unable to parse requirement: %v", err))
		}
		opts.Labels = sel
	}
	if fs := q.Get("fieldSelector"); fs != "" {
		sel, err := meta.ParseFieldSelector(fs)
		if err != nil {
			return meta.NewBadRequest(fmt.Sprintf("invalid field selector: %v", err))
		}
		for _, req := range sel.Requirements() {
			if !st.SupportsField(req.Field) {
				return meta.NewBadRequest(fmt.Sprintf("%q is not a known field selector: only %s", req.Field, st.SelectableFieldList()))
			}
		}
		opts.Fields = sel
	}
	return nil
}

// writeOptions reads dryRun, fieldValidation and, but for DeleteOptions,
// fieldManager.
func writeOptions(q url.Values, kind string) (registry.WriteOptions, error) {
	var opts registry.WriteOptions
	for _, v := range q["dryRun"] {
		if v != "All" {
			return opts, meta.NewInvalidOptions(kind, meta.ErrorList{meta.NotSupported(meta.NewPath("dryRun"), v, []string{"All"})})
		}
		opts.DryRun = true
	}
	switch v := q.Get("fieldValidation"); v {
	case "", "Warn", "Ignore", "Strict":
		opts.FieldValidation = v
	default:
		return opts, meta.NewInvalidOptions(kind, meta.ErrorList{meta.NotSupported(meta.NewPath("fieldValidation"), v, []string{"Ignore", "Strict", "Warn"})})
	}
	if kind != "DeleteOptions" {
		opts.FieldManager = q.Get("fieldManager")
		if errs := validateFieldManager(opts.FieldManager); len(errs) > 0 {
			return opts, meta.NewInvalidOptions(kind, errs)
		}
	}
	return opts, nil
}
