package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/internal/bufpool"
	"github.com/kapi-dev/kapi/meta"
)

// serveResource serves every URL below a group version: collections, objects
// and subresources.
func (s *Server) serveResource(w http.ResponseWriter, r *http.Request) {
	info, ok, qerr := resolveRequest(r)
	if !ok {
		s.writeError(w, r, meta.NewNotFoundPath())
		return
	}
	q := queryOf(r)
	info.selected = selectedName(q, info)
	st, registered := s.reg.Store(meta.GroupVersionResource{Group: info.Group, Version: info.Version, Resource: info.Resource})
	info.registered = registered
	noteRequest(r.Context(), info)
	if info.Verb == "watch" {
		noteLongRunning(r.Context(), info)
	}
	// Authorization comes before anything about the resource is revealed
	// (whether it exists too), and is the same for dry-run requests.
	if err := s.authorize(r.Context(), info.attributes()); err != nil {
		s.writeError(w, r, err)
		return
	}
	if !registered {
		s.writeError(w, r, meta.NewNotFoundPath())
		return
	}
	res := st.Resource()
	// A namespaced type needs a namespace for named objects; a cluster-scoped
	// one has none.
	if (res.Namespaced && info.Name != "" && info.Namespace == "") || (!res.Namespaced && info.Namespace != "") {
		s.writeError(w, r, meta.NewNotFoundPath())
		return
	}
	// A query that does not parse is refused, never read in part.
	if qerr == nil {
		qerr = checkPretty(q)
	}
	if qerr != nil {
		s.writeError(w, r, qerr)
		return
	}
	if res.Virtual != nil {
		s.serveVirtual(w, r, st, info)
		return
	}
	if info.Subresource != "" {
		s.serveSubresource(w, r, st, info)
		return
	}
	switch info.Verb {
	case "get":
		s.handleGet(w, r, st, info)
	case "list":
		s.handleList(w, r, st, info)
	case "watch":
		s.handleWatch(w, r, st, info)
	case "create":
		if info.Name != "" {
			s.writeError(w, r, meta.NewMethodNotAllowed(r.Method, ""))
			return
		}
		s.handleCreate(w, r, st, info)
	case "update":
		if info.Name == "" {
			s.writeError(w, r, meta.NewMethodNotAllowed(r.Method, ""))
			return
		}
		s.handleUpdate(w, r, st, info)
	case "patch":
		if info.Name == "" {
			s.writeError(w, r, meta.NewMethodNotAllowed(r.Method, ""))
			return
		}
		s.handlePatch(w, r, st, info)
	case "delete":
		s.handleDelete(w, r, st, info)
	case "deletecollection":
		if res.Resource == "namespaces" {
			s.writeError(w, r, meta.NewMethodNotAllowed(r.Method, ""))
			return
		}
		s.handleDeleteCollection(w, r, st, info)
	default:
		s.writeError(w, r, meta.NewMethodNotAllowed(r.Method, ""))
	}
}

// serveSubresource serves /status, /scale and custom subresources.
func (s *Server) serveSubresource(w http.ResponseWriter, r *http.Request, st *registry.Store, info requestInfo) {
	res := st.Resource()
	switch {
	case info.Subresource == "status" && res.Subresources.Status:
		switch r.Method {
		case http.MethodGet:
			s.handleGet(w, r, st, info)
		case http.MethodPut:
			s.handleUpdate(w, r, st, info)
		case http.MethodPatch:
			s.handlePatch(w, r, st, info)
		default:
			s.writeError(w, r, meta.NewMethodNotAllowed(r.Method, ""))
		}
	case info.Subresource == "scale" && res.Subresources.Scale != nil:
		s.serveScale(w, r, st, info)
	case info.Subresource == "finalize" && res.Group == "" && res.Resource == "namespaces":
		if r.Method != http.MethodPut {
			s.writeError(w, r, meta.NewMethodNotAllowed(r.Method, ""))
			return
		}
		s.handleUpdate(w, r, st, info)
	default:
		if sr, ok := res.Subresources.Custom[info.Subresource]; ok {
			s.serveCustomSubresource(w, r, st, info, sr)
			return
		}
		s.writeError(w, r, meta.NewNotFoundPath())
	}
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request, st *registry.Store, info requestInfo) {
	p := payload{kind: bodyObject, res: st.Resource()}
	c, err := p.choose(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	body, err := st.Get(r.Context(), info.Namespace, info.Name, queryOf(r).Get("resourceVersion"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p.json = body
	s.writeEncoded(w, r, http.StatusOK, c, p, false)
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request, st *registry.Store, info requestInfo) {
	p := payload{kind: bodyList, res: st.Resource()}
	c, err := p.choose(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	lq, err := s.listOptions(queryOf(r), st)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if lq.sendInitialEvents != nil {
		// kube-apiserver refuses it on anything but a watch.
		s.writeError(w, r, meta.NewInvalidOptions("ListOptions", meta.ErrorList{
			meta.Forbidden(meta.NewPath("sendInitialEvents"), "sendInitialEvents is forbidden for list"),
		}))
		return
	}
	opts := lq.opts
	if s.streamList(w, r, st, info.Namespace, c, opts) {
		return
	}
	opts.KeepItems = true
	var list registry.ListResult
	if err := st.List(r.Context(), info.Namespace, opts, &list); err != nil {
		s.writeError(w, r, err)
		return
	}
	p.items = list.Items
	if p.items == nil {
		p.items = [][]byte{}
	}
	p.listMeta = meta.ListMeta{ResourceVersion: strconv.FormatInt(list.ResourceVersion, 10), Continue: list.Continue, RemainingItemCount: list.RemainingItemCount}
	s.writeEncoded(w, r, http.StatusOK, c, p, false)
}

func writeJSONString(buf *bytes.Buffer, s string) {
	b, _ := json.Marshal(s)
	buf.Write(b)
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

// writeOptions reads dryRun and fieldValidation.
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

// readBody reads and decodes the body of a request to st (JSON, YAML, or
// protobuf for types with a protobuf message) into a generic object. Duplicate fields are
// returned as field validation problems. The media type is checked before
// the body is read: an unsupported one is 415.
func (s *Server) readBody(r *http.Request, st *registry.Store, info requestInfo) (registry.Object, []string, error) {
	target := bodyTargetOf(st, info)
	mt, err := bodyMediaType(r, target.msg != nil)
	if err != nil {
		return nil, nil, err
	}
	// Every decoder copies what it keeps (strings, base64 of bytes): the
	// body's bytes are free again once decoded (FuzzDecodeBody checks).
	bp := bodyBuffers.Get()
	defer bodyBuffers.Put(bp, maxPooledBody)
	data, err := readAllSized(*bp, http.MaxBytesReader(nil, r.Body, s.cfg.MaxRequestBodyBytes), r.ContentLength, s.cfg.MaxRequestBodyBytes)
	*bp = data
	if err != nil {
		return nil, nil, bodyReadError(err, s.cfg.MaxRequestBodyBytes)
	}
	target.yamlAliasBytes = int(s.cfg.MaxRequestBodyBytes)
	obj, dups, err := decodeBody(mt, data, target)
	if err == nil && info.Subresource != "scale" && isCustomResource(st.Resource()) {
		err = customTypeMeta(obj, data, target.apiVersion)
	}
	return obj, dups, err
}

// customTypeMeta refuses the body of a custom resource without kind or
// apiVersion, as kube-apiserver's decoding of custom resources does; it
// fills them from the URL only for its built-in types (checkTypeMeta).
// Protobuf bodies carry both in their envelope.
func customTypeMeta(obj registry.Object, data []byte, apiVersion string) error {
	if k, _ := obj["kind"].(string); k == "" {
		const most = 1 << 10 // of the body quoted back
		quoted := string(data[:min(len(data), most)])
		if len(data) > most {
			quoted += "..."
		}
		return meta.NewBadRequest(fmt.Sprintf("Object 'Kind' is missing in '%s'", quoted))
	}
	if av, _ := obj["apiVersion"].(string); av == "" {
		return meta.NewBadRequest(fmt.Sprintf("the API version in the data () does not match the expected API version (%s)", apiVersion))
	}
	return nil
}

// checkURLName refuses a PUT body whose metadata.name is not the URL's,
// absent included, as kube-apiserver's update handler does.
func checkURLName(obj registry.Object, name string) error {
	md, _ := obj["metadata"].(map[string]any)
	if bodyName, _ := md["name"].(string); bodyName != name {
		return meta.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", bodyName, name))
	}
	return nil
}

// bodyBuffers holds the buffers request bodies are read into (readBody);
// maxPooledBody bounds the ones kept, so that a rare large body does not pin
// its buffer.
var bodyBuffers = bufpool.New(4096)

const maxPooledBody = 64 << 10

// readAllSized is io.ReadAll into buf (reused when large enough) with the
// buffer sized for a body of the declared length (when it is known and
// within limit), so that a body is read into one allocation at most instead
// of a series of growing ones.
func readAllSized(buf []byte, r io.Reader, length, limit int64) ([]byte, error) {
	b := buf[:0]
	if length > 0 && length <= limit && int64(cap(b)) < length+1 {
		// One byte more than declared, so that the read that finds the end
		// does not have to grow the buffer.
		b = make([]byte, 0, length+1)
	}
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				return b, nil
			}
			return b, err
		}
	}
}

func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request, st *registry.Store, info requestInfo) {
	opts, err := writeOptions(queryOf(r), "CreateOptions")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	obj, dups, err := s.readBody(r, st, info)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	opts.UnknownFields = dups
	opts.FieldManager = managerOrUserAgent(opts.FieldManager, r.UserAgent())
	res, err := st.Create(r.Context(), info.Namespace, obj, opts)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	for _, warning := range res.Warnings {
		addWarning(w, warning)
	}
	s.writeRaw(w, r, http.StatusCreated, res.JSON)
}

func (s *Server) handleUpdate(w http.ResponseWriter, r *http.Request, st *registry.Store, info requestInfo) {
	opts, err := writeOptions(queryOf(r), "UpdateOptions")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	obj, dups, err := s.readBody(r, st, info)
	if err == nil {
		err = checkURLName(obj, info.Name)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	opts.UnknownFields = dups
	opts.Subresource = info.Subresource
	opts.FieldManager = managerOrUserAgent(opts.FieldManager, r.UserAgent())
	res, err := st.Update(r.Context(), info.Namespace, info.Name, obj, opts)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	for _, warning := range res.Warnings {
		addWarning(w, warning)
	}
	code := http.StatusOK
	if res.Created {
		code = http.StatusCreated
	}
	s.writeRaw(w, r, code, res.JSON)
}

// deleteOptions reads DeleteOptions from the query and the body.
func (s *Server) deleteOptions(r *http.Request) (registry.DeleteOptions, error) {
	var opts registry.DeleteOptions
	wo, err := writeOptions(queryOf(r), "DeleteOptions")
	if err != nil {
		return opts, err
	}
	opts.DryRun = wo.DryRun
	q := queryOf(r)
	opts.PropagationPolicy = q.Get("propagationPolicy")
	if n, present, err := queryInt(q, "gracePeriodSeconds"); err != nil {
		return opts, err
	} else if present {
		opts.GracePeriodSeconds = &n
	}
	if orphan, present, err := queryBool(q, "orphanDependents"); err != nil {
		return opts, err
	} else if present && opts.PropagationPolicy == "" {
		opts.PropagationPolicy = registry.PropagationBackground
		if orphan {
			opts.PropagationPolicy = registry.PropagationOrphan
		}
	}
	if body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, s.cfg.MaxRequestBodyBytes)); err != nil {
		return opts, bodyReadError(err, s.cfg.MaxRequestBodyBytes)
	} else if len(bytes.TrimSpace(body)) > 0 {
		body, err := deleteOptionsJSON(r, body)
		if err != nil {
			return opts, err
		}
		var do struct {
			Kind               string   `json:"kind"`
			DryRun             []string `json:"dryRun"`
			PropagationPolicy  *string  `json:"propagationPolicy"`
			GracePeriodSeconds *int64   `json:"gracePeriodSeconds"`
			OrphanDependents   *bool    `json:"orphanDependents"`
			Preconditions      *struct {
				UID             *string `json:"uid"`
				ResourceVersion *string `json:"resourceVersion"`
			} `json:"preconditions"`
		}
		if err := json.Unmarshal(body, &do); err != nil {
			return opts, meta.NewBadRequest(fmt.Sprintf("error decoding DeleteOptions: %v", err))
		}
		for _, v := range do.DryRun {
			if v != "All" {
				return opts, meta.NewInvalidOptions("DeleteOptions", meta.ErrorList{meta.NotSupported(meta.NewPath("dryRun"), v, []string{"All"})})
			}
			opts.DryRun = true
		}
		if do.PropagationPolicy != nil {
			opts.PropagationPolicy = *do.PropagationPolicy
		} else if do.OrphanDependents != nil {
			opts.PropagationPolicy = registry.PropagationBackground
			if *do.OrphanDependents {
				opts.PropagationPolicy = registry.PropagationOrphan
			}
		}
		if do.GracePeriodSeconds != nil {
			opts.GracePeriodSeconds = do.GracePeriodSeconds
		}
		if p := do.Preconditions; p != nil {
			if p.UID != nil {
				opts.PreconditionUID = *p.UID
			}
			if p.ResourceVersion != nil {
				opts.PreconditionResourceVersion = *p.ResourceVersion
			}
		}
	}
	return opts, nil
}

func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request, st *registry.Store, info requestInfo) {
	opts, err := s.deleteOptions(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := st.Delete(r.Context(), info.Namespace, info.Name, opts)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if res.Pending {
		// Held by finalizers: kube-apiserver answers with the object.
		s.writeRaw(w, r, http.StatusOK, res.JSON)
		return
	}
	rs := st.Resource()
	uid := meta.GetUID(res.Object)
	status := meta.Status{
		TypeMeta: meta.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   meta.StatusSuccess,
		Details:  &meta.StatusDetails{Name: info.Name, Group: rs.Group, Kind: rs.Resource, UID: uid},
	}
	s.writeObject(w, r, http.StatusOK, status)
}

// handleDeleteCollection deletes every object of the collection that matches
// the selectors and answers the list of deleted objects, as kube-apiserver.
func (s *Server) handleDeleteCollection(w http.ResponseWriter, r *http.Request, st *registry.Store, info requestInfo) {
	opts, err := s.deleteOptions(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	lq, err := s.listOptions(queryOf(r), st)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	lo := lq.opts
	lo.Limit, lo.Continue, lo.KeepItems = 0, "", true
	var list registry.ListResult
	if err := st.List(r.Context(), info.Namespace, lo, &list); err != nil {
		s.writeError(w, r, err)
		return
	}
	res := st.Resource()
	var deleted [][]byte
	for _, raw := range list.Items {
		var head struct {
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			s.writeError(w, r, meta.NewInternalError(err))
			return
		}
		out, err := st.Delete(r.Context(), head.Metadata.Namespace, head.Metadata.Name, opts)
		if meta.ReasonOf(err) == meta.StatusReasonNotFound {
			continue // deleted meanwhile
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		deleted = append(deleted, out.JSON)
	}
	var buf bytes.Buffer
	buf.WriteString(`{"kind":`)
	writeJSONString(&buf, res.ListKind)
	buf.WriteString(`,"apiVersion":`)
	writeJSONString(&buf, res.APIVersion())
	buf.WriteString(`,"metadata":{"resourceVersion":"`)
	buf.WriteString(strconv.FormatInt(list.ResourceVersion, 10))
	buf.WriteString(`"},"items":[`)
	for i, it := range deleted {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(it)
	}
	buf.WriteString("]}")
	s.writeRaw(w, r, http.StatusOK, buf.Bytes())
}

// serveScale serves GET, PUT and PATCH on /scale (an autoscaling/v1 Scale).
func (s *Server) serveScale(w http.ResponseWriter, r *http.Request, st *registry.Store, info requestInfo) {
	writeScale := func(ctx context.Context, obj registry.Object, opts registry.WriteOptions) (*registry.Result, error) {
		opts.Subresource = "scale"
		scale, err := st.UpdateScale(ctx, info.Namespace, info.Name, obj, opts)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(scale)
		return &registry.Result{JSON: b, Object: scale}, err
	}
	switch r.Method {
	case http.MethodGet:
		scale, err := st.GetScale(r.Context(), info.Namespace, info.Name)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.writeObject(w, r, http.StatusOK, scale)
	case http.MethodPut:
		opts, err := writeOptions(queryOf(r), "UpdateOptions")
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		obj, _, err := s.readBody(r, st, info)
		if err == nil {
			err = checkURLName(obj, info.Name)
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		opts.FieldManager = managerOrUserAgent(opts.FieldManager, r.UserAgent())
		res, err := writeScale(r.Context(), obj, opts)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.writeRaw(w, r, http.StatusOK, res.JSON)
	case http.MethodPatch:
		// Scale is a built-in kind: JSON, merge and strategic merge patches.
		s.patch(w, r, patchTarget{
			gvk:       registry.ScaleGroupVersionKind,
			name:      info.Name,
			strategic: true,
			get:       func(ctx context.Context) (registry.Object, error) { return st.GetScale(ctx, info.Namespace, info.Name) },
			write:     writeScale,
		})
	default:
		s.writeError(w, r, meta.NewMethodNotAllowed(r.Method, ""))
	}
}
