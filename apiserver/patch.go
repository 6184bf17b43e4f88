package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/patch"
	"github.com/kapi-dev/kapi/schema"
)

// Patch content types.
const (
	jsonPatchType      = "application/json-patch+json"
	mergePatchType     = "application/merge-patch+json"
	strategicPatchType = "application/strategic-merge-patch+json"
	applyPatchType     = "application/apply-patch+yaml"
)

// maxPatchRetries bounds the retries of a patch that lost a race with
// another writer.
const maxPatchRetries = 5

// patchTarget is what a patch applies to: an object or a subresource view.
type patchTarget struct {
	gvk  meta.GroupVersionKind
	name string
	// schema drives strategic merge and finds unknown fields (nil: none).
	schema *schema.Schema
	// strategic says strategic merge patch is served.
	strategic bool
	// fields serves apply (nil: apply is not served).
	fields *patch.FieldManager
	// subresource is "" or the subresource the patch is sent to.
	subresource string
	// get returns the current state with its resourceVersion.
	get func(ctx context.Context) (registry.Object, error)
	// write stores the patched state; a resourceVersion in it is a
	// precondition.
	write func(ctx context.Context, obj registry.Object, opts registry.WriteOptions) (*registry.Result, error)
	// create stores a new object (apply to a missing object; nil: 404).
	create func(ctx context.Context, obj registry.Object, opts registry.WriteOptions) (*registry.Result, error)
}

// handlePatch serves PATCH on an object or its /status: JSON patch, merge
// patch, strategic merge patch (built-in types and types that declare the
// metadata) and server-side apply.
func (s *Server) handlePatch(w http.ResponseWriter, r *http.Request, st *registry.Store, info requestInfo) {
	res := st.Resource()
	t := patchTarget{
		gvk:         res.GroupVersionKind(),
		name:        info.Name,
		schema:      res.Schema,
		strategic:   res.ServesStrategicMerge(),
		fields:      st.FieldManager(),
		subresource: info.Subresource,
		get: func(ctx context.Context) (registry.Object, error) {
			return st.GetObject(ctx, info.Namespace, info.Name)
		},
		write: func(ctx context.Context, obj registry.Object, opts registry.WriteOptions) (*registry.Result, error) {
			return st.Update(ctx, info.Namespace, info.Name, obj, opts)
		},
	}
	if info.Subresource == "" {
		t.create = func(ctx context.Context, obj registry.Object, opts registry.WriteOptions) (*registry.Result, error) {
			// Apply creates: it needs the create permission as well.
			a := info.attributes()
			a.Verb = "create"
			if err := s.authorize(ctx, a); err != nil {
				return nil, err
			}
			return st.Create(ctx, info.Namespace, obj, opts)
		}
	}
	s.patch(w, r, t)
}

// patch reads a PATCH request and applies it to target.
func (s *Server) patch(w http.ResponseWriter, r *http.Request, t patchTarget) {
	opts, err := writeOptions(queryOf(r), "PatchOptions")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	opts.Subresource = t.subresource
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		s.writeError(w, r, unsupportedPatch(ct, t))
		return
	}
	switch {
	case mt == jsonPatchType, mt == mergePatchType:
	case mt == strategicPatchType && t.strategic:
	case mt == applyPatchType && t.fields != nil:
	default:
		s.writeError(w, r, unsupportedPatch(mt, t))
		return
	}
	force, forced, err := queryBool(queryOf(r), "force")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if forced && mt != applyPatchType {
		s.writeError(w, r, meta.NewInvalidOptions("PatchOptions", meta.ErrorList{
			meta.Forbidden(meta.NewPath("force"), "may not be specified for non-apply patch"),
		}))
		return
	}
	if mt == applyPatchType {
		if opts.FieldManager == "" {
			s.writeError(w, r, meta.NewInvalidOptions("PatchOptions", meta.ErrorList{
				meta.Required(meta.NewPath("fieldManager"), "is required for apply patch"),
			}))
			return
		}
	} else {
		opts.FieldManager = managerOrUserAgent(opts.FieldManager, r.UserAgent())
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, s.cfg.MaxRequestBodyBytes))
	if err != nil {
		s.writeError(w, r, bodyReadError(err, s.cfg.MaxRequestBodyBytes))
		return
	}
	var (
		res      *registry.Result
		created  bool
		warnings []string
	)
	if mt == applyPatchType {
		res, created, warnings, err = s.applyPatch(r.Context(), t, body, opts, force)
	} else {
		res, warnings, err = s.applyOtherPatch(r.Context(), t, mt, body, opts)
	}
	if err != nil {
		for _, warning := range warnings {
			addWarning(w, warning)
		}
		s.writeError(w, r, err)
		return
	}
	for _, warning := range append(warnings, res.Warnings...) {
		addWarning(w, warning)
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	s.writeRaw(w, r, code, res.JSON)
}

// applyOtherPatch applies a JSON, merge or strategic merge patch to the
// current state and writes the result with the current resourceVersion as
// its precondition (unless the patch sets one), retrying when another write
// got in between.
func (s *Server) applyOtherPatch(ctx context.Context, t patchTarget, mt string, body []byte, opts registry.WriteOptions) (*registry.Result, []string, error) {
	var smp map[string]any
	var smpProblems []string
	if mt == strategicPatchType {
		v, dups, err := codec.DecodeJSON(body)
		if err != nil {
			return nil, nil, meta.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, nil, meta.NewBadRequest("error decoding patch: a strategic merge patch must be a JSON object")
		}
		smp = m
		smpProblems = duplicateProblems(dups)
	}
	for attempt := 0; ; attempt++ {
		cur, err := t.get(ctx)
		if err != nil {
			return nil, nil, err
		}
		curRV := meta.GetResourceVersion(cur)
		var obj map[string]any
		var problems []string
		switch mt {
		case strategicPatchType:
			if obj, err = patch.Strategic(cur, smp, t.schema); err != nil {
				return nil, nil, t.patchError(err, body)
			}
			problems = smpProblems
		case mergePatchType:
			if obj, problems, err = patch.Merge(cur, body); err != nil {
				return nil, nil, t.patchError(err, body)
			}
		default:
			curJSON, err := json.Marshal(cur)
			if err != nil {
				return nil, nil, meta.NewInternalError(err)
			}
			var patched []byte
			patched, problems, err = patch.JSONPatch(curJSON, body, 2*s.cfg.MaxRequestBodyBytes)
			if err != nil {
				return nil, nil, t.patchError(err, body)
			}
			v, _, err := codec.DecodeStoredJSON(patched) // the stored object with the patch: numbers as stored
			if err != nil {
				return nil, nil, meta.NewInternalError(err)
			}
			var ok bool
			if obj, ok = v.(map[string]any); !ok {
				return nil, nil, meta.NewInvalid(t.gvk, t.name, meta.ErrorList{meta.Invalid(meta.NewPath("patch"), string(body), "the patched document is not a JSON object")})
			}
		}
		for _, f := range schema.Prune(obj, t.schema) {
			problems = append(problems, fmt.Sprintf("unknown field %q", f))
		}
		warnings, err := t.fieldValidation(problems, opts.FieldValidation, body)
		if err != nil {
			return nil, nil, err
		}
		if err := t.checkIdentity(obj, cur); err != nil {
			return nil, nil, err
		}
		// The patch may carry its own resourceVersion precondition; if not,
		// the state read above is the precondition.
		pinned := meta.GetResourceVersion(obj) != curRV
		if !pinned {
			meta.SetResourceVersion(obj, curRV)
		}
		wo := opts
		wo.FieldValidation = "Ignore" // reported above
		res, err := t.write(ctx, obj, wo)
		if meta.ReasonOf(err) == meta.StatusReasonConflict && !pinned && attempt < maxPatchRetries {
			continue
		}
		if err != nil {
			return nil, warnings, err // the warnings go with the error, as kube-apiserver sends them
		}
		return res, warnings, nil
	}
}

// applyPatch serves server-side apply: the configuration is merged into the
// current object (or a new one) by the type's field manager, conflicts with
// other managers fail unless forced, and the result is written with the
// managedFields the apply computed.
func (s *Server) applyPatch(ctx context.Context, t patchTarget, body []byte, opts registry.WriteOptions, force bool) (*registry.Result, bool, []string, error) {
	config, problems, err := decodeYAMLOrJSON(body, int(s.cfg.MaxRequestBodyBytes))
	if err != nil {
		return nil, false, nil, meta.NewBadRequest(fmt.Sprintf("error decoding YAML: %v", err))
	}
	// Unknown fields are refused at every validation level: an applied
	// configuration claims ownership of what it names.
	if unknown := schema.Prune(meta.DeepCopyMap(config), t.schema); len(unknown) > 0 {
		msgs := make([]string, len(unknown))
		for i, f := range unknown {
			msgs[i] = "." + f + ": field not declared in schema"
		}
		msg := msgs[0]
		if len(msgs) > 1 {
			msg = "errors:\n  " + strings.Join(msgs, "\n  ")
		}
		return nil, false, nil, meta.NewBadRequest(fmt.Sprintf("failed to create typed patch object (%s; %s, Kind=%s): %s",
			objectRef(config, t.name), t.gvk.GroupVersion(), t.gvk.Kind, msg))
	}
	var warnings []string
	switch opts.FieldValidation {
	case "Strict":
		if len(problems) > 0 {
			return nil, false, nil, meta.NewBadRequest("error strict decoding YAML: " + strings.Join(problems, ", "))
		}
	case "Ignore":
	default:
		warnings = problems
	}
	for attempt := 0; ; attempt++ {
		cur, err := t.get(ctx)
		if meta.ReasonOf(err) == meta.StatusReasonNotFound && t.create != nil {
			cur, err = nil, nil
		}
		if err != nil {
			return nil, false, nil, err
		}
		obj, err := t.fields.Apply(cur, config, patch.ApplyOptions{Manager: opts.FieldManager, Force: force, Subresource: t.subresource, Now: time.Now()})
		if err != nil {
			return nil, false, nil, t.patchError(err, body)
		}
		if name := meta.GetName(obj); name != t.name {
			return nil, false, nil, meta.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", name, t.name))
		}
		wo := opts
		wo.FieldValidation = "Ignore"
		wo.Applied = true
		if cur == nil {
			res, err := t.create(ctx, obj, wo)
			if meta.ReasonOf(err) == meta.StatusReasonAlreadyExists && attempt < maxPatchRetries {
				continue // created meanwhile: apply to it
			}
			if err != nil {
				return nil, false, nil, err
			}
			return res, true, warnings, nil
		}
		if err := t.checkIdentity(obj, cur); err != nil {
			return nil, false, nil, err
		}
		pinned := meta.GetResourceVersion(config) != ""
		if !pinned {
			meta.SetResourceVersion(obj, meta.GetResourceVersion(cur))
		}
		res, err := t.write(ctx, obj, wo)
		if meta.ReasonOf(err) == meta.StatusReasonConflict && !pinned && attempt < maxPatchRetries {
			continue
		}
		if err != nil {
			return nil, false, nil, err
		}
		return res, false, warnings, nil
	}
}

// checkIdentity refuses a patch that renames the object or changes its uid.
func (t patchTarget) checkIdentity(obj, cur map[string]any) error {
	if name := meta.GetName(obj); name != t.name {
		return meta.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", name, t.name))
	}
	if uid, old := meta.GetUID(obj), meta.GetUID(cur); uid != old {
		return meta.NewInvalid(t.gvk, t.name, meta.ErrorList{meta.Invalid(meta.NewPath("metadata", "uid"), uid, "field is immutable")})
	}
	return nil
}

// fieldValidation reports unknown and duplicate fields of a (non-apply)
// patch per the fieldValidation level: warnings for Warn, a 422 naming every
// problem for Strict, as kube-apiserver does for patches.
func (t patchTarget) fieldValidation(problems []string, level string, body []byte) ([]string, error) {
	switch level {
	case "Ignore":
		return nil, nil
	case "Strict":
		if len(problems) == 0 {
			return nil, nil
		}
		return nil, meta.NewInvalid(t.gvk, t.name, meta.ErrorList{
			meta.Invalid(meta.NewPath("patch"), shorten(string(body)), "strict decoding error: "+strings.Join(problems, ", ")),
		})
	}
	return problems, nil
}

// patchError turns an error of package patch into the Status to answer.
func (t patchTarget) patchError(err error, body []byte) error {
	var pe *patch.Error
	if !errors.As(err, &pe) {
		if _, ok := meta.AsStatusError(err); ok {
			return err
		}
		return meta.NewInternalError(err)
	}
	switch pe.Code {
	case http.StatusBadRequest:
		return meta.NewBadRequest(pe.Message)
	case http.StatusRequestEntityTooLarge:
		return meta.NewRequestEntityTooLarge(pe.Message)
	}
	if len(pe.Fields) > 0 {
		return meta.NewInvalid(t.gvk, t.name, pe.Fields)
	}
	return meta.NewInvalid(t.gvk, t.name, meta.ErrorList{meta.Invalid(meta.NewPath("patch"), shorten(string(body)), pe.Message)})
}

// shorten keeps messages about large patches readable.
func shorten(s string) string {
	const max = 1024
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func objectRef(obj map[string]any, name string) string {
	if n := meta.GetName(obj); n != "" {
		name = n
	}
	if ns := meta.GetNamespace(obj); ns != "" {
		return ns + "/" + name
	}
	return name
}

func duplicateProblems(dups []string) []string {
	out := make([]string, 0, len(dups))
	for _, d := range dups {
		out = append(out, fmt.Sprintf("duplicate field %q", d))
	}
	return out
}

// decodeYAMLOrJSON decodes a JSON or YAML request body into a generic
// object. problems lists duplicate fields (field validation findings).
// YAML aliases may add at most aliasBytes.
func decodeYAMLOrJSON(data []byte, aliasBytes int) (map[string]any, []string, error) {
	var (
		v    any
		dups []string
		err  error
	)
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' {
		// YAML goes through the bounded decoder: alias bombs and deep
		// nesting are refused, duplicate keys reported by path.
		v, dups, err = decodeYAML(data, aliasBytes)
	} else {
		v, dups, err = codec.DecodeJSON(data)
	}
	if err != nil {
		return nil, nil, err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, nil, errors.New("the body must be an object")
	}
	return obj, duplicateProblems(dups), nil
}

// managerOrUserAgent is the field manager of a write that names none: the
// product of the User-Agent (the part before the first "/"), printable
// characters only, at most 128 bytes, as kube-apiserver.
func managerOrUserAgent(manager, userAgent string) string {
	if manager != "" {
		return manager
	}
	product, _, _ := strings.Cut(userAgent, "/")
	var b strings.Builder
	for _, r := range product {
		if !unicode.IsPrint(r) {
			continue
		}
		if b.Len()+utf8.RuneLen(r) > meta.FieldManagerMaxLength {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// validateFieldManager checks the fieldManager query parameter.
func validateFieldManager(fm string) meta.ErrorList {
	p := meta.NewPath("fieldManager")
	if len(fm) > meta.FieldManagerMaxLength {
		return meta.ErrorList{meta.TooLong(p, fm, meta.FieldManagerMaxLength)}
	}
	if strings.IndexFunc(fm, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return meta.ErrorList{meta.Invalid(p, fm, "must only contain printable characters")}
	}
	return nil
}

func unsupportedPatch(mt string, t patchTarget) error {
	types := []string{jsonPatchType, mergePatchType}
	if t.strategic {
		types = append(types, strategicPatchType)
	}
	if t.fields != nil {
		types = append(types, applyPatchType)
	}
	se := meta.NewUnsupportedMediaType(mt)
	se.Status.Message = "the body of the request was in an unknown format - accepted media types include: " + strings.Join(types, ", ")
	return se
}
