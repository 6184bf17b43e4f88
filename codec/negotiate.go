// Package codec holds kapi's wire formats and their negotiation: media types,
// Accept parsing with parameters and q-values, and choosing a representation.
package codec

import (
	"cmp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Media types kapi speaks.
const (
	MediaJSON     = "application/json"
	MediaYAML     = "application/yaml"
	MediaProtobuf = "application/vnd.kubernetes.protobuf"
)

// MediaType is one entry of an Accept header, or one representation a server
// offers. Params holds the Kubernetes parameters as=, g=, v= (and any other).
type MediaType struct {
	Type    string // e.g. "application"
	Subtype string // e.g. "json"
	Params  map[string]string
	Q       float64
}

// String renders the media type as "type/subtype;k=v;..." (params sorted).
func (m MediaType) String() string {
	var b strings.Builder
	b.WriteString(m.Type)
	b.WriteByte('/')
	b.WriteString(m.Subtype)
	keys := make([]string, 0, len(m.Params))
	for k := range m.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteByte(';')
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(m.Params[k])
	}
	return b.String()
}

// Essence returns "type/subtype".
func (m MediaType) Essence() string { return m.Type + "/" + m.Subtype }

// ParseMediaType parses one media type with parameters. It reports false when
// the text is not of the form type/subtype.
func ParseMediaType(s string) (MediaType, bool) {
	first, params, _ := strings.Cut(s, ";")
	full := strings.ToLower(strings.TrimSpace(first))
	slash := strings.IndexByte(full, '/')
	if slash <= 0 || slash == len(full)-1 || strings.ContainsAny(full, " \t,") {
		return MediaType{}, false
	}
	mt := MediaType{Type: full[:slash], Subtype: full[slash+1:], Q: 1}
	for p := range strings.SplitSeq(params, ";") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		eq := strings.IndexByte(p, '=')
		if eq <= 0 {
			return MediaType{}, false
		}
		k := strings.ToLower(strings.TrimSpace(p[:eq]))
		v := strings.Trim(strings.TrimSpace(p[eq+1:]), `"`)
		if k == "q" {
			q, err := strconv.ParseFloat(v, 64)
			if err != nil || q < 0 || q > 1 {
				return MediaType{}, false
			}
			mt.Q = q
			continue
		}
		if mt.Params == nil {
			mt.Params = map[string]string{}
		}
		mt.Params[k] = v
	}
	return mt, true
}

// ParseAccept parses an Accept header into its entries ordered by preference
// (q-value, then order of appearance). Malformed entries are skipped. An
// empty header means "*/*".
func ParseAccept(header string) []MediaType {
	if strings.TrimSpace(header) == "" {
		return []MediaType{{Type: "*", Subtype: "*", Q: 1}}
	}
	var out []MediaType
	for h := header; ; {
		part, rest, more := cutAccept(h)
		if mt, ok := ParseMediaType(part); ok && mt.Q > 0 {
			out = append(out, mt)
		}
		if !more {
			break
		}
		h = rest
	}
	// By q-value, then the more specific first (type/subtype before
	// type/* before */*), then in order of appearance.
	slices.SortStableFunc(out, func(a, b MediaType) int {
		if a.Q != b.Q {
			return cmp.Compare(b.Q, a.Q)
		}
		return cmp.Compare(b.specificity(), a.specificity())
	})
	return out
}

func (m MediaType) specificity() int {
	switch {
	case m.Type == "*":
		return 0
	case m.Subtype == "*":
		return 1
	}
	return 2
}

// cutAccept cuts h at its first comma outside quotes.
func cutAccept(h string) (part, rest string, found bool) {
	quoted := false
	for i := 0; i < len(h); i++ {
		switch h[i] {
		case '"':
			quoted = !quoted
		case ',':
			if !quoted {
				return h[:i], h[i+1:], true
			}
		}
	}
	return h, "", false
}

// Matches reports whether an accepted entry a admits the offer o: the type
// and subtype match (with wildcards), and the Kubernetes parameters as, g and
// v agree (an entry without "as" accepts only offers without "as").
func (a MediaType) Matches(o MediaType) bool {
	if a.Type != "*" && a.Type != o.Type {
		return false
	}
	if a.Subtype != "*" && a.Subtype != o.Subtype {
		return false
	}
	for _, k := range []string{"as", "g", "v"} {
		if a.Params[k] != o.Params[k] {
			return false
		}
	}
	return true
}

// Negotiate picks the offer the Accept header prefers. It returns the index
// of the chosen offer and the accepted entry it matched, or -1 when nothing
// is acceptable.
func Negotiate(accept string, offers []MediaType) (int, MediaType) {
	for _, a := range ParseAccept(accept) {
		for i, o := range offers {
			if a.Matches(o) {
				return i, a
			}
		}
	}
	return -1, MediaType{}
}

// Format is a serialisation of a response body.
type Format uint8

// Formats, in the order kapi prefers them when a wildcard allows several.
const (
	FormatJSON Format = iota + 1
	FormatYAML
	FormatProtobuf
)

var formatTypes = [...]string{FormatJSON: MediaJSON, FormatYAML: MediaYAML, FormatProtobuf: MediaProtobuf}

// MediaType returns the media type of the format, e.g. "application/json".
func (f Format) MediaType() string {
	if int(f) < len(formatTypes) {
		return formatTypes[f]
	}
	return ""
}

// Conversion targets of the Accept parameter "as" (group meta.k8s.io).
const (
	AsTable                     = "Table"
	AsPartialObjectMetadata     = "PartialObjectMetadata"
	AsPartialObjectMetadataList = "PartialObjectMetadataList"
)

// MetaGroup is the group of the conversion targets.
const MetaGroup = "meta.k8s.io"

// Choice is a negotiated representation: a format and, when the client asked
// for one, a conversion of the body (as=Table;g=meta.k8s.io;v=v1).
type Choice struct {
	Format Format
	// As is "" (the object itself), AsTable, AsPartialObjectMetadata or
	// AsPartialObjectMetadataList.
	As string
	// Version is the meta.k8s.io version of As: "v1" or "v1beta1".
	Version string
	// Pretty is set by the media type parameter pretty=1.
	Pretty bool
}

// Choose picks the representation an Accept header prefers among those allow
// admits. Entries are tried by preference (ParseAccept); each entry is tried
// as JSON, YAML and protobuf, in this order, where its type admits them.
// Entries asking for a conversion kapi does not know (as, g and v other than
// Table, PartialObjectMetadata or PartialObjectMetadataList in meta.k8s.io
// v1 or v1beta1) or for a stream other than "watch" are skipped. An empty
// header chooses JSON.
func Choose(accept string, allow func(Choice) bool) (Choice, bool) {
	if strings.TrimSpace(accept) == "" {
		c := Choice{Format: FormatJSON}
		return c, allow(c)
	}
	for _, a := range ParseAccept(accept) {
		c, ok := choiceParams(a)
		if !ok {
			continue
		}
		for f := FormatJSON; f <= FormatProtobuf; f++ {
			mt := f.MediaType()
			slash := strings.IndexByte(mt, '/')
			if (a.Type != "*" && a.Type != mt[:slash]) || (a.Subtype != "*" && a.Subtype != mt[slash+1:]) {
				continue
			}
			c.Format = f
			if allow(c) {
				return c, true
			}
		}
	}
	return Choice{}, false
}

// choiceParams reads the Kubernetes parameters of an Accept entry.
func choiceParams(a MediaType) (Choice, bool) {
	var c Choice
	as, hasAs := a.Params["as"]
	g, hasG := a.Params["g"]
	v, hasV := a.Params["v"]
	if hasAs || hasG || hasV {
		switch as {
		case AsTable, AsPartialObjectMetadata, AsPartialObjectMetadataList:
		default:
			return c, false
		}
		if g != MetaGroup || (v != "v1" && v != "v1beta1") {
			return c, false
		}
		c.As, c.Version = as, v
	}
	if s, ok := a.Params["stream"]; ok && s != "" && s != "watch" {
		return c, false
	}
	c.Pretty = a.Params["pretty"] == "1"
	return c, true
}
