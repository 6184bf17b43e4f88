package schema

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/kapi-dev/kapi/meta"
)

// IntegerRewrite is an integer field whose integral value was written in
// another form ("1e2", "8.0e1", "2.0", "-0") and that Normalize rewrote as a
// plain integer. Kubernetes stores such values of custom resources so (its
// generic decoding reads every number as float64 and encodes it again);
// kapi rewrites only integer fields, where a typed client needs it.
type IntegerRewrite struct {
	Path    string      // "spec.ports[0].port"
	Written json.Number // the value as written
	Schema  *Schema     // the field's schema (type integer or int-or-string)
}

// Float reports whether the value was written with a fraction or an
// exponent, which Go's decoding into an integer field refuses ("-0" it
// accepts).
func (r IntegerRewrite) Float() bool {
	return strings.ContainsAny(string(r.Written), ".eE")
}

// integerSchema reports whether s holds integers: type integer or
// x-kubernetes-int-or-string.
func integerSchema(s *Schema) bool {
	return s != nil && (s.Type == TypeInteger || s.XIntOrString)
}

// canonicalInteger returns the plain integer literal of n when n is an
// integral number written otherwise. Plain integers, and numbers that are not
// integers by Validate's rule (a fraction, or a magnitude beyond 2^53 written
// as a float), are left alone: ok is false.
func canonicalInteger(n json.Number) (json.Number, bool) {
	if !strings.ContainsAny(string(n), ".eE") && n != "-0" {
		return "", false // the common case: already canonical
	}
	i, ok := meta.AsInt64(n)
	if !ok {
		return "", false
	}
	return json.Number(strconv.FormatInt(i, 10)), true
}

// number rewrites n, the value at p.path plus e, when its schema s holds
// integers and n is an integral number in another form, recording the
// rewrite; it returns the value to store and whether it changed.
func (p *pruner) number(n json.Number, s *Schema, e pathElem) (json.Number, bool) {
	if !p.integers || !integerSchema(s) {
		return n, false
	}
	c, ok := canonicalInteger(n)
	if !ok {
		return n, false
	}
	p.push(e)
	p.rewritten = append(p.rewritten, IntegerRewrite{Path: p.at().String(), Written: n, Schema: s})
	p.pop()
	return c, true
}

// sortRewrites orders rewrites by path, so that the first one (the one an
// error names) does not depend on map iteration order.
func sortRewrites(rs []IntegerRewrite) {
	slices.SortFunc(rs, func(a, b IntegerRewrite) int { return strings.Compare(a.Path, b.Path) })
}
