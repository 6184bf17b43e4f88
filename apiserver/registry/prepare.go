package registry

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/schema"
)

// prepareBody is the first step of every create and update: it checks the
// body's kind, apiVersion and namespace, prunes unknown fields (returning the
// field-validation warnings) and applies schema defaults. It returns the
// body's metadata.
func (s *Store) prepareBody(obj Object, ns string, opts WriteOptions) (map[string]any, []string, error) {
	if err := s.checkTypeMeta(obj); err != nil {
		return nil, nil, err
	}
	if _, err := metadataOf(obj); err != nil {
		return nil, nil, err
	}
	if h := s.res.Strategy.CheckBody; h != nil {
		if err := h(obj); err != nil {
			return nil, nil, err
		}
	}
	warnings, err := s.pruneAndDefault(obj, opts)
	if err != nil {
		return nil, nil, err
	}
	md := obj["metadata"].(map[string]any)
	if err := s.checkNamespace(md, ns); err != nil {
		return nil, nil, err
	}
	delete(md, "selfLink") // deprecated: kube-apiserver clears what clients send
	// As kube-apiserver decodes the body: the prepare hooks (the generation's
	// comparison) and admission see no empty values; what admission adds is
	// left out again before field management.
	meta.OmitEmpty(obj, s.res.Options.OmitEmpty...)
	return md, warnings, nil
}

// checkTypeMeta verifies kind and apiVersion of a request body and fills them
// when absent.
func (s *Store) checkTypeMeta(obj Object) error {
	res := s.res
	kind, kok := obj["kind"].(string)
	av, aok := obj["apiVersion"].(string)
	if (obj["kind"] != nil && !kok) || (obj["apiVersion"] != nil && !aok) {
		return meta.NewBadRequest("kind and apiVersion must be strings")
	}
	if kind == "" {
		obj["kind"] = res.Kind
	} else if kind != res.Kind {
		return meta.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", av, res.APIVersion()) + kindMismatch(kind, res.Kind))
	}
	if av == "" {
		obj["apiVersion"] = res.APIVersion()
	} else if av != res.APIVersion() {
		return meta.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", av, res.APIVersion()))
	}
	return nil
}

func kindMismatch(got, want string) string {
	return fmt.Sprintf(" or the kind in the data (%s) does not match the expected kind (%s)", got, want)
}

// metadataOf returns obj.metadata, creating it when absent.
func metadataOf(obj Object) (map[string]any, error) {
	switch md := obj["metadata"].(type) {
	case map[string]any:
		return md, nil
	case nil:
		m := map[string]any{}
		obj["metadata"] = m
		return m, nil
	default:
		return nil, meta.NewBadRequest("metadata must be an object")
	}
}

// checkNamespace makes the body's namespace agree with the URL's.
func (s *Store) checkNamespace(md map[string]any, ns string) error {
	bodyNS, _ := md["namespace"].(string)
	if !s.res.Namespaced {
		if bodyNS != "" {
			delete(md, "namespace") // kube-apiserver clears it on cluster-scoped objects
		}
		return nil
	}
	if bodyNS != "" && bodyNS != ns {
		return meta.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	md["namespace"] = ns
	return nil
}

// pruneAndDefault drops unknown fields (reporting them per fieldValidation),
// writes integral integers as plain integers (refusing "2.0" in a built-in
// type) and applies schema defaults.
func (s *Store) pruneAndDefault(obj Object, opts WriteOptions) ([]string, error) {
	norm := schema.Normalize(obj, s.res.Schema)
	problems := make([]string, 0, len(norm.Unknown)+len(opts.UnknownFields))
	problems = append(problems, opts.UnknownFields...)
	for _, f := range norm.Unknown {
		problems = append(problems, fmt.Sprintf("unknown field %q", f))
	}
	warnings, err := fieldProblems(s.res.GroupVersionKind(), opts.FieldValidation, problems)
	if err != nil {
		return nil, err
	}
	if err := s.typedIntegers(norm.Integers); err != nil {
		return nil, err
	}
	if _, err := metadataOf(obj); err != nil {
		return nil, err
	}
	schema.Default(obj, s.res.Schema)
	return warnings, nil
}

// fieldProblems applies the fieldValidation level to the problems a body
// has (unknown or duplicate fields): the warnings to send, or with Strict
// kube-apiserver's 400.
func fieldProblems(kind meta.GroupVersionKind, level string, problems []string) ([]string, error) {
	switch level {
	case "Strict":
		if len(problems) > 0 {
			return nil, meta.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: strict decoding error: %s",
				kind.Kind, kind.Version, kind.Kind, strings.Join(problems, ", ")))
		}
		return nil, nil
	case "Ignore":
		return nil, nil
	}
	return problems, nil
}

// validate runs metadata, schema, rule and strategy validation; the
// warnings are rules an update did not break but that the object still
// fails where the update left it unchanged.
func (s *Store) validate(ctx context.Context, obj, old Object) (meta.ErrorList, []string) {
	res := s.res
	md := obj["metadata"].(map[string]any)
	nameRule := res.Options.NameValidation
	if nameRule == nil {
		nameRule = meta.IsDNS1123Subdomain
	}
	errs := meta.ValidateObjectMeta(md, res.Namespaced, nameRule, meta.NewPath("metadata"))
	finErrs, warnings := finalizerNames(obj, old, res.Options.StandardFinalizers)
	errs = append(errs, finErrs...)
	errs = append(errs, schemaValidate(obj, old, res.Schema)...)
	if !res.rules.Empty() {
		if blockingError(errs) { // metadata's and the schema's
			// Rules assume the schema holds: kube-apiserver does not run them.
			errs = append(errs, meta.Invalid(meta.NewPath("<nil>"), nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"))
		} else {
			ruleErrs, ruleWarnings := res.rules.Validate(ctx, obj, old)
			errs = append(errs, ruleErrs...)
			warnings = append(warnings, ruleWarnings...)
		}
	}
	if old == nil {
		if h := res.Strategy.Validate; h != nil {
			errs = append(errs, h(ctx, obj)...)
		}
	} else if h := res.Strategy.ValidateUpdate; h != nil {
		errs = append(errs, h(ctx, obj, old)...)
	} else if h := res.Strategy.Validate; h != nil {
		errs = append(errs, h(ctx, obj)...)
	}
	return errs, warnings
}

// blockingError reports whether metadata or schema validation found an
// error that keeps the rules from running, as kube-apiserver decides: a
// missing, unsupported, too long or mistyped value, or too many items.
func blockingError(errs meta.ErrorList) bool {
	for _, e := range errs {
		switch e.Type {
		case meta.CauseTypeFieldValueNotSupported, meta.CauseTypeFieldValueRequired, meta.CauseTypeFieldValueTooLong,
			meta.CauseTypeTooMany, meta.CauseTypeTypeInvalid:
			return true
		}
	}
	return false
}

// invalid is the answer to an object that fails validation: 422 Invalid,
// or, for a type with Options.TypedDecoding, a 400 for a value of the wrong
// JSON type, as kube-apiserver's decoding into Go structs answers.
func (s *Store) invalid(name string, errs meta.ErrorList, warnings []string) error {
	res := s.res
	var se *meta.StatusError
	if res.Options.TypedDecoding {
		for _, e := range errs {
			if e.Type == meta.CauseTypeTypeInvalid && e.BadValue != "null" {
				se = meta.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %s: %s",
					res.Kind, res.Version, res.Kind, e.Field, e.Detail))
				break
			}
		}
	}
	if se == nil {
		se = meta.NewInvalid(res.GroupVersionKind(), name, errs)
	}
	se.Warnings = slices.Clone(warnings) // sent with the error, as kube-apiserver does
	return se
}

// schemaValidate validates everything but metadata, which the server
// validates itself; an update (old not nil) is ratcheted: what it leaves
// unchanged is not checked again.
func schemaValidate(obj, old Object, sch *schema.Schema) meta.ErrorList {
	md := obj["metadata"]
	delete(obj, "metadata")
	var errs meta.ErrorList
	if old == nil {
		errs = schema.Validate(obj, sch)
	} else {
		errs = schema.ValidateUpdate(obj, old, sch)
	}
	obj["metadata"] = md
	return errs
}

// fitSize checks enc, obj's encoding in *buf, against the object size
// limit. Over it, a write that is no server-side apply is encoded again
// without metadata.managedFields, as kube-apiserver retries a write storage
// refuses as too large: only an object too large even so is a 413.
func (s *Store) fitSize(buf *[]byte, enc []byte, obj Object, opts WriteOptions) ([]byte, error) {
	err := s.checkSize(enc)
	md, _ := obj["metadata"].(map[string]any)
	if _, ok := md["managedFields"]; err == nil || opts.Applied || !ok {
		return enc, err
	}
	delete(md, "managedFields")
	if enc, err = encodeStoredInto(buf, obj); err != nil {
		return nil, meta.NewInternalError(err)
	}
	return enc, s.checkSize(enc)
}

func (s *Store) checkSize(enc []byte) error {
	if max := s.reg.cfg.MaxObjectSize; max > 0 && len(enc) > max {
		return meta.NewRequestEntityTooLarge(fmt.Sprintf("object is larger than the limit of %d bytes", max))
	}
	return nil
}
