// Package codec holds kapi's wire formats and their negotiation: media types,
// Accept parsing with parameters and q-values, and choosing a representation.
package codec

import (
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
	parts := strings.Split(s, ";")
	full := strings.ToLower(strings.TrimSpace(parts[0]))
	slash := strings.IndexByte(full, '/')
	if slash <= 0 || slash == len(full)-1 || strings.ContainsAny(full, " \t,") {
		return MediaType{}, false
	}
	mt := MediaType{Type: full[:slash], Subtype: full[slash+1:], Q: 1}
	for _, p := range parts[1:] {
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
	for _, part := range splitAccept(header) {
		if mt, ok := ParseMediaType(part); ok && mt.Q > 0 {
			out = append(out, mt)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Q > out[j].Q })
	return out
}

// splitAccept splits on commas outside quotes.
func splitAccept(h string) []string {
	var parts []string
	start, quoted := 0, false
	for i := 0; i < len(h); i++ {
		switch h[i] {
		case '"':
			quoted = !quoted
		case ',':
			if !quoted {
				parts = append(parts, h[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, h[start:])
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
