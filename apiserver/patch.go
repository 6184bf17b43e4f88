package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/kapi-dev/kapi/apiserver/meta"
	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
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
	// get returns the current state with its resourceVersion.
	get func(ctx context.Context) (registry.Object, error)
	// write stores the patched state; a resourceVersion in it is a
	// precondition.
	write func(ctx context.Context, obj registry.Object) ([]byte, []string, error)
	gvk   meta.GroupVersionKind
}

// handlePatch applies a JSON patch or a JSON merge patch to the current
// object (or /status) and writes the result with the current resourceVersion
// as its precondition, retrying when another write got in between.
func (s *Server) handlePatch(w http.ResponseWriter, r *http.Request, st *registry.Store, info requestInfo) {
	opts, err := writeOptions(r.URL.Query(), "PatchOptions")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	opts.Subresource = info.Subresource
	s.patch(w, r, info.Name, patchTarget{
		gvk: st.Resource().GroupVersionKind(),
		get: func(ctx context.Context) (registry.Object, error) {
			return st.GetObject(ctx, info.Namespace, info.Name)
		},
		write: func(ctx context.Context, obj registry.Object) ([]byte, []string, error) {
			res, err := st.Update(ctx, info.Namespace, info.Name, obj, opts)
			if err != nil {
				return nil, nil, err
			}
			return res.JSON, res.Warnings, nil
		},
	})
}

func (s *Server) patch(w http.ResponseWriter, r *http.Request, name string, target patchTarget) {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		s.writeError(w, r, meta.NewUnsupportedMediaType(ct))
		return
	}
	switch mt {
	case jsonPatchType, mergePatchType:
	default:
		s.writeError(w, r, unsupportedPatch(mt))
		return
	}
	if f := r.URL.Query().Get("force"); f != "" {
		s.writeError(w, r, meta.NewInvalidOptions("PatchOptions", meta.ErrorList{
			meta.Forbidden(meta.NewPath("force"), "may not be specified for non-apply patch"),
		}))
		return
	}
	patch, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, s.cfg.MaxRequestBodyBytes))
	if err != nil {
		s.writeError(w, r, meta.NewRequestEntityTooLarge("the request body is too large"))
		return
	}
	var jp jsonpatch.Patch
	if mt == jsonPatchType {
		if jp, err = jsonpatch.DecodePatch(patch); err != nil {
			s.writeError(w, r, meta.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err)))
			return
		}
	} else if !json.Valid(patch) {
		s.writeError(w, r, meta.NewBadRequest("error decoding patch: the patch is not valid JSON"))
		return
	}
	for attempt := 0; ; attempt++ {
		cur, err := target.get(r.Context())
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		curRV := meta.GetResourceVersion(cur)
		curJSON, err := json.Marshal(cur)
		if err != nil {
			s.writeError(w, r, meta.NewInternalError(err))
			return
		}
		var patched []byte
		if mt == jsonPatchType {
			patched, err = jp.Apply(curJSON)
			if err != nil {
				msg := fmt.Sprintf("the patch cannot be applied: %v", err)
				if errors.Is(err, jsonpatch.ErrTestFailed) {
					msg = err.Error()
				}
				s.writeError(w, r, meta.NewInvalid(target.gvk, name, meta.ErrorList{meta.Invalid(meta.NewPath("patch"), string(patch), msg)}))
				return
			}
		} else if patched, err = jsonpatch.MergePatch(curJSON, patch); err != nil {
			s.writeError(w, r, meta.NewBadRequest(fmt.Sprintf("error applying merge patch: %v", err)))
			return
		}
		v, _, err := codec.DecodeJSON(patched)
		obj, ok := v.(map[string]any)
		if err != nil || !ok {
			s.writeError(w, r, meta.NewBadRequest("the patched object is not a JSON object"))
			return
		}
		// The patch may carry its own resourceVersion precondition; if not,
		// the state read above is the precondition.
		pinned := meta.GetResourceVersion(obj) != curRV
		if !pinned {
			meta.SetResourceVersion(obj, curRV)
		}
		body, warnings, err := target.write(r.Context(), obj)
		if meta.ReasonOf(err) == meta.StatusReasonConflict && !pinned && attempt < maxPatchRetries {
			continue
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		for _, warning := range warnings {
			addWarning(w, warning)
		}
		s.writeRaw(w, r, http.StatusOK, body)
		return
	}
}

func unsupportedPatch(mt string) error {
	se := meta.NewUnsupportedMediaType(mt)
	se.Status.Message = fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: %s, %s", jsonPatchType, mergePatchType)
	return se
}
