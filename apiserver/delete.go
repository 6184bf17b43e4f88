package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
)

// handleDelete serves the delete verb: the object while finalizers hold it,
// otherwise a Success Status naming it.
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
// The answer is negotiated as a list's and its sink is made before anything
// is deleted: a request that cannot be answered (406, or a Table option that
// does not read) deletes nothing. The objects are deleted as they are listed
// (one snapshot, read a page at a time) and the answer is streamed as they
// go, in every representation of a list (protobuf past its buffer through a
// temporary file, spoolSink), so that the server never holds the collection.
// As for a streamed list, an error after the first bytes went out cuts the
// answer short.
func (s *Server) handleDeleteCollection(w http.ResponseWriter, r *http.Request, st *registry.Store, info requestInfo) {
	p := payload{kind: bodyList, res: st.Resource()}
	c, err := p.choose(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
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
	lo.Limit, lo.Continue, lo.KeepItems = 0, "", false
	sw := newStreamWriter(w, c.Format.MediaType(), acceptsGzip(r.Header.Values("Accept-Encoding")))
	var out io.Writer = sw
	pretty := c.Format == codec.FormatJSON && wantPretty(r, c)
	if pretty {
		out = &indentWriter{w: sw}
	}
	var sink registry.ListSink
	if c.Format == codec.FormatProtobuf {
		var ps *protobufListSink
		if ps, err = s.deletedProtobufListSink(sw, st.Resource(), c); err == nil {
			defer ps.release()
			spool := &spoolSink{ps: ps, log: s.log}
			defer spool.close()
			sink = spool
		}
	} else if sink, err = s.listSink(r, out, st.Resource(), c, &lo); err == nil && sink == nil {
		err = meta.NewInternalError(fmt.Errorf("deletecollection: no list sink for %+v", c)) // every negotiated one has a sink
	}
	if err != nil {
		sw.release()
		s.writeError(w, r, err)
		return
	}
	err = st.List(r.Context(), info.Namespace, lo, &deletingSink{ctx: r.Context(), st: st, opts: opts, out: sink})
	if err == nil && pretty {
		_, err = sw.Write(newline)
	}
	if err == nil {
		err = sw.finish()
	}
	s.endStreamedList(w, r, sw, err)
}

// deletingSink deletes each object of a list and hands the object as deleted
// to out; one deleted meanwhile is left out.
type deletingSink struct {
	ctx  context.Context
	st   *registry.Store
	opts registry.DeleteOptions
	out  registry.ListSink
}

func (d *deletingSink) Begin(h registry.ListHead) error { return d.out.Begin(h) }

func (d *deletingSink) Item(item []byte) error {
	out, err := deleteItem(d.ctx, d.st, item, d.opts)
	if err != nil || out == nil {
		return err
	}
	return d.out.Item(out)
}

func (d *deletingSink) End(e registry.ListEnd) error { return d.out.End(e) }

// deleteItem deletes the listed object raw and returns it as deleted, or nil
// when it was deleted meanwhile.
func deleteItem(ctx context.Context, st *registry.Store, raw []byte, opts registry.DeleteOptions) ([]byte, error) {
	var head struct {
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, meta.NewInternalError(err)
	}
	out, err := st.Delete(ctx, head.Metadata.Namespace, head.Metadata.Name, opts)
	if meta.ReasonOf(err) == meta.StatusReasonNotFound {
		return nil, nil // deleted meanwhile
	}
	if err != nil {
		return nil, err
	}
	return out.JSON, nil
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
	} else if present && opts.PropagationPolicy != "" {
		return opts, bothPolicies(opts.PropagationPolicy)
	} else if present {
		opts.PropagationPolicy = registry.PropagationBackground
		if orphan {
			opts.PropagationPolicy = registry.PropagationOrphan
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, s.cfg.MaxRequestBodyBytes))
	if err != nil {
		return opts, bodyReadError(err, s.cfg.MaxRequestBodyBytes)
	}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := readDeleteOptionsBody(r, body, &opts); err != nil {
			return opts, err
		}
	}
	return opts, nil
}

// readDeleteOptionsBody reads a DeleteOptions body (JSON, YAML or protobuf)
// into opts; what it sets overrides the query's.
func readDeleteOptionsBody(r *http.Request, body []byte, opts *registry.DeleteOptions) error {
	body, err := deleteOptionsJSON(r, body)
	if err != nil {
		return err
	}
	var do struct {
		Kind               string   `json:"kind"`
		APIVersion         string   `json:"apiVersion"`
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
		return meta.NewBadRequest(fmt.Sprintf("error decoding DeleteOptions: %v", err))
	}
	if do.Kind != "" && do.Kind != "DeleteOptions" {
		return meta.NewBadRequest(fmt.Sprintf("no kind %q is registered for version %q", do.Kind, do.APIVersion))
	}
	for _, v := range do.DryRun {
		if v != "All" {
			return meta.NewInvalidOptions("DeleteOptions", meta.ErrorList{meta.NotSupported(meta.NewPath("dryRun"), v, []string{"All"})})
		}
		opts.DryRun = true
	}
	if do.PropagationPolicy != nil && do.OrphanDependents != nil {
		return bothPolicies(*do.PropagationPolicy)
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
	return nil
}

// bothPolicies is kube-apiserver's answer to DeleteOptions that set both
// orphanDependents and propagationPolicy.
func bothPolicies(policy string) error {
	return meta.NewInvalidOptions("DeleteOptions", meta.ErrorList{meta.Invalid(meta.NewPath("propagationPolicy"), policy,
		"orphanDependents and deletionPropagation cannot be both set")})
}
