package apiserver

import (
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

// handlePatch applies a JSON patch or a JSON merge patch to the current
// object and writes the result with the current resourceVersion as its
// precondition, retrying when another write got in between.
func (s *Server) handlePatch(w http.ResponseWriter, r *http.Request, st *registry.Store, info requestInfo) {
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
	opts, err := writeOptions(r.URL.Query(), "PatchOptions")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if f := r.URL.Query().Get("force"); f != "" {
		s.writeError(w, r, meta.NewInvalidOptions("PatchOptions", meta.ErrorList{
			meta.Forbidden(meta.NewPath("force"), "may not be specified for non-apply patch"),
		}))
		return
	}
	opts.Subresource = info.Subresource
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
	res := st.Resource()
	for attempt := 0; ; attempt++ {
		cur, err := st.GetObject(r.Context(), info.Namespace, info.Name)
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
				if errors.Is(err, jsonpatch.ErrTestFailed) {
					s.writeError(w, r, meta.NewInvalid(res.GroupVersionKind(), info.Name, meta.ErrorList{meta.Invalid(meta.NewPath("patch"), string(patch), err.Error())}))
				} else {
					s.writeError(w, r, meta.NewInvalid(res.GroupVersionKind(), info.Name, meta.ErrorList{meta.Invalid(meta.NewPath("patch"), string(patch), fmt.Sprintf("the patch cannot be applied: %v", err))}))
				}
				return
			}
		} else {
			if patched, err = jsonpatch.MergePatch(curJSON, patch); err != nil {
				s.writeError(w, r, meta.NewBadRequest(fmt.Sprintf("error applying merge patch: %v", err)))
				return
			}
		}
		v, _, err := codec.DecodeJSON(patched)
		obj, ok := v.(map[string]any)
		if err != nil || !ok {
			s.writeError(w, r, meta.NewBadRequest("the patched object is not a JSON object"))
			return
		}
		// The patch may carry its own resourceVersion precondition; if not,
		// the object read above is the precondition.
		pinned := meta.GetResourceVersion(obj) != curRV
		if !pinned {
			meta.SetResourceVersion(obj, curRV)
		}
		result, err := st.Update(r.Context(), info.Namespace, info.Name, obj, opts)
		if meta.ReasonOf(err) == meta.StatusReasonConflict && !pinned && attempt < maxPatchRetries {
			continue
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		for _, warning := range result.Warnings {
			addWarning(w, warning)
		}
		s.writeRaw(w, r, http.StatusOK, result.JSON)
		return
	}
}

func unsupportedPatch(mt string) error {
	se := meta.NewUnsupportedMediaType(mt)
	se.Status.Message = fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: %s, %s", jsonPatchType, mergePatchType)
	return se
}
