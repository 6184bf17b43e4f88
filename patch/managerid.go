package patch

import (
	"strings"
	"unicode/utf8"

	"github.com/kapi-dev/kapi/codec"
)

// managerID identifies a manager entry, as kube-apiserver keys them: the
// manager, operation, apiVersion (Update entries only) and subresource.
type managerID struct {
	Manager     string `json:"manager,omitempty"`
	Operation   string `json:"operation,omitempty"`
	APIVersion  string `json:"apiVersion,omitempty"`
	Subresource string `json:"subresource,omitempty"`
}

// String is id as encoding/json marshals it (the fields in order, empty
// ones left out), written directly: it is taken for every manager of every
// apply and update.
func (id managerID) String() string {
	b := make([]byte, 0, 32+len(id.Manager)+len(id.Operation)+len(id.APIVersion)+len(id.Subresource))
	b = append(b, '{')
	for _, f := range [...]struct{ key, value string }{
		{`"manager":`, id.Manager}, {`"operation":`, id.Operation},
		{`"apiVersion":`, id.APIVersion}, {`"subresource":`, id.Subresource},
	} {
		if f.value == "" {
			continue
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = codec.AppendJSONString(append(b, f.key...), f.value)
	}
	return string(append(b, '}'))
}

// parseManagerID reads back what String wrote (a zero managerID for
// anything that is not a JSON object). It runs for every manager of every
// update and apply: an id without escapes, the usual one, is read directly,
// others with kapi's JSON decoder.
func parseManagerID(s string) managerID {
	if strings.IndexByte(s, '\\') < 0 {
		if id, ok := parsePlainManagerID(s); ok {
			return id
		}
	}
	v, _, err := codec.DecodeJSON([]byte(s))
	m, ok := v.(map[string]any)
	if err != nil || !ok {
		return managerID{}
	}
	str := func(k string) string { s, _ := m[k].(string); return s }
	return managerID{Manager: str("manager"), Operation: str("operation"), APIVersion: str("apiVersion"), Subresource: str("subresource")}
}

// parsePlainManagerID reads {"key":"value",...} with no escapes and no
// spaces, the form String writes; ok is false for anything else.
func parsePlainManagerID(s string) (id managerID, ok bool) {
	if len(s) < 2 || s[0] != '{' || s[len(s)-1] != '}' {
		return managerID{}, false
	}
	rest := s[1 : len(s)-1]
	for rest != "" {
		var key, value string
		if key, rest, ok = plainJSONString(rest); !ok || rest == "" || rest[0] != ':' {
			return managerID{}, false
		}
		if value, rest, ok = plainJSONString(rest[1:]); !ok {
			return managerID{}, false
		}
		switch key {
		case "manager":
			id.Manager = value
		case "operation":
			id.Operation = value
		case "apiVersion":
			id.APIVersion = value
		case "subresource":
			id.Subresource = value
		default:
			return managerID{}, false
		}
		if rest != "" {
			if rest[0] != ',' || len(rest) == 1 {
				return managerID{}, false
			}
			rest = rest[1:]
		}
	}
	return id, true
}

// plainJSONString reads a JSON string without escapes at the start of s.
func plainJSONString(s string) (value, rest string, ok bool) {
	if s == "" || s[0] != '"' {
		return "", s, false
	}
	end := strings.IndexByte(s[1:], '"')
	if end < 0 {
		return "", s, false
	}
	value = s[1 : 1+end]
	for i := 0; i < len(value); i++ {
		if value[i] < 0x20 {
			return "", s, false
		}
	}
	if !utf8.ValidString(value) {
		return "", s, false
	}
	return value, s[2+end:], true
}
