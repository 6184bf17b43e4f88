package meta

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

const (
	subdomainMsg = `a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`
	labelMsg     = `a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`
	qnameMsg     = `name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`
	labelValMsg  = `a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`
)

func TestIsDNS1123Subdomain(t *testing.T) {
	good := []string{"a", "ab", "a-b", "a.b", "0", "a1.b2.c3", "example.com", strings.Repeat("a", 253),
		strings.Repeat("a", 63) + "." + strings.Repeat("b", 63)}
	for _, s := range good {
		if errs := IsDNS1123Subdomain(s); errs != nil {
			t.Errorf("IsDNS1123Subdomain(%q) = %q", s, errs)
		}
	}
	bad := map[string][]string{
		"":                             {subdomainMsg},
		"A":                            {subdomainMsg},
		"-a":                           {subdomainMsg},
		"a-":                           {subdomainMsg},
		"a..b":                         {subdomainMsg},
		".a":                           {subdomainMsg},
		"a_b":                          {subdomainMsg},
		"a/b":                          {subdomainMsg},
		strings.Repeat("a", 254):       {"must be no more than 253 characters"},
		strings.Repeat("A", 254):       {"must be no more than 253 characters", subdomainMsg},
		"ünï":                          {subdomainMsg},
		"a b":                          {subdomainMsg},
		"a.b.":                         {subdomainMsg},
		"exa\nmple":                    {subdomainMsg},
		strings.Repeat("a", 64):        nil, // a subdomain's labels are not limited to 63 here
		"a." + strings.Repeat("b", 64): nil,
	}
	for s, want := range bad {
		if got := IsDNS1123Subdomain(s); !reflect.DeepEqual(got, want) {
			t.Errorf("IsDNS1123Subdomain(%q) =\n%q\nwant\n%q", s, got, want)
		}
	}
}

func TestIsDNS1123Label(t *testing.T) {
	for _, s := range []string{"a", "my-name", "123-abc", strings.Repeat("a", 63)} {
		if errs := IsDNS1123Label(s); errs != nil {
			t.Errorf("IsDNS1123Label(%q) = %q", s, errs)
		}
	}
	tests := map[string][]string{
		"":                      {labelMsg},
		"a.b":                   {"must not contain dots"},
		"A":                     {labelMsg},
		"a-":                    {labelMsg},
		strings.Repeat("a", 64): {"must be no more than 63 characters"},
	}
	for s, want := range tests {
		if got := IsDNS1123Label(s); !reflect.DeepEqual(got, want) {
			t.Errorf("IsDNS1123Label(%q) = %q, want %q", s, got, want)
		}
	}
}

func TestIsDNS1035Label(t *testing.T) {
	if errs := IsDNS1035Label("abc-1"); errs != nil {
		t.Errorf("IsDNS1035Label(abc-1) = %q", errs)
	}
	if errs := IsDNS1035Label("1abc"); len(errs) != 1 || !strings.HasPrefix(errs[0], "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character") {
		t.Errorf("IsDNS1035Label(1abc) = %q", errs)
	}
}

func TestIsValidPathSegmentName(t *testing.T) {
	tests := map[string][]string{
		"ok":      nil,
		"Caps_ok": nil,
		".":       {"may not be '.'"},
		"..":      {"may not be '..'"},
		"...":     nil,
		"a/b":     {"may not contain '/'"},
		"a%b":     {"may not contain '%'"},
		"a/%":     {"may not contain '/'", "may not contain '%'"},
	}
	for s, want := range tests {
		if got := IsValidPathSegmentName(s); !reflect.DeepEqual(got, want) {
			t.Errorf("IsValidPathSegmentName(%q) = %q, want %q", s, got, want)
		}
	}
}

func TestIsQualifiedName(t *testing.T) {
	for _, s := range []string{"a", "MyName", "my.name", "123-abc", "a_b", "example.com/MyName", "k8s.io/x", strings.Repeat("a", 63),
		strings.Repeat("a", 253) + "/" + strings.Repeat("b", 63)} {
		if errs := IsQualifiedName(s); errs != nil {
			t.Errorf("IsQualifiedName(%q) = %q", s, errs)
		}
	}
	tests := map[string][]string{
		"":                      {"name part must be non-empty", qnameMsg},
		"-a":                    {qnameMsg},
		"a_":                    {qnameMsg},
		"/a":                    {"prefix part must be non-empty"},
		"a/":                    {"name part must be non-empty", qnameMsg},
		"Example.com/a":         {"prefix part " + subdomainMsg},
		strings.Repeat("a", 64): {"name part must be no more than 63 characters"},
		"a/b/c":                 {`a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`},
	}
	for s, want := range tests {
		if got := IsQualifiedName(s); !reflect.DeepEqual(got, want) {
			t.Errorf("IsQualifiedName(%q) =\n%q\nwant\n%q", s, got, want)
		}
	}
}

func TestIsValidLabelValue(t *testing.T) {
	for _, s := range []string{"", "a", "MyValue", "my_value", "12345", "a.b-c_d", strings.Repeat("v", 63)} {
		if errs := IsValidLabelValue(s); errs != nil {
			t.Errorf("IsValidLabelValue(%q) = %q", s, errs)
		}
	}
	tests := map[string][]string{
		"-a":                    {labelValMsg},
		"a b":                   {labelValMsg},
		"a/b":                   {labelValMsg},
		strings.Repeat("v", 64): {"must be no more than 63 characters"},
	}
	for s, want := range tests {
		if got := IsValidLabelValue(s); !reflect.DeepEqual(got, want) {
			t.Errorf("IsValidLabelValue(%q) = %q, want %q", s, got, want)
		}
	}
}

func TestValidateGenerateName(t *testing.T) {
	tests := []struct {
		prefix string
		ok     bool
	}{
		{"web-", true},
		{"web", true},
		{"web.", false},
		{"Web-", false},
		{"-", false},
		{"a--", true},
	}
	for _, tt := range tests {
		errs := ValidateGenerateName(tt.prefix, IsDNS1123Subdomain)
		if (len(errs) == 0) != tt.ok {
			t.Errorf("ValidateGenerateName(%q) = %q, want ok=%v", tt.prefix, errs, tt.ok)
		}
	}
}

func errStrings(l ErrorList) []string {
	var out []string
	for _, e := range l {
		out = append(out, e.Error())
	}
	return out
}

func TestValidateObjectMeta(t *testing.T) {
	tests := []struct {
		name       string
		md         string
		namespaced bool
		rule       func(string) []string
		raw        []json.RawMessage // fieldsV1 of managedFields[i], set after decoding
		want       []string
	}{
		{name: "valid namespaced", md: `{"name":"a","namespace":"ns","labels":{"app":"web","example.com/tier":""},"annotations":{"Example.com/Note":"anything goes"},"finalizers":["example.com/f"],"generation":1}`, namespaced: true},
		{name: "valid cluster", md: `{"name":"a.b"}`},
		{name: "missing name", md: `{"namespace":"ns"}`, namespaced: true,
			want: []string{"metadata.name: Required value: name or generateName is required"}},
		{name: "missing namespace", md: `{"name":"a"}`, namespaced: true,
			want: []string{"metadata.namespace: Required value"}},
		{name: "namespace on cluster type", md: `{"name":"a","namespace":"ns"}`,
			want: []string{"metadata.namespace: Forbidden: not allowed on this type"}},
		{name: "bad name", md: `{"name":"A_b","namespace":"ns"}`, namespaced: true,
			want: []string{`metadata.name: Invalid value: "A_b": ` + subdomainMsg}},
		{name: "name rule", md: `{"name":"a.b"}`, rule: IsDNS1123Label,
			want: []string{`metadata.name: Invalid value: "a.b": must not contain dots`}},
		{name: "path segment rule", md: `{"name":"a/b"}`, rule: IsValidPathSegmentName,
			want: []string{`metadata.name: Invalid value: "a/b": may not contain '/'`}},
		{name: "bad generateName", md: `{"name":"ab","generateName":"A-"}`,
			want: []string{`metadata.generateName: Invalid value: "A-": ` + subdomainMsg}},
		{name: "bad namespace", md: `{"name":"a","namespace":"a.b"}`, namespaced: true,
			want: []string{`metadata.namespace: Invalid value: "a.b": must not contain dots`}},
		{name: "negative generation", md: `{"name":"a","generation":-1}`,
			want: []string{"metadata.generation: Invalid value: -1: must be greater than or equal to 0"}},
		{name: "bad labels", md: `{"name":"a","labels":{"-k":"v","k":"-v"}}`,
			want: []string{`metadata.labels: Invalid value: "-k": ` + qnameMsg, `metadata.labels: Invalid value: "-v": ` + labelValMsg}},
		{name: "bad annotation key", md: `{"name":"a","annotations":{"a b":"x"}}`,
			want: []string{`metadata.annotations: Invalid value: "a b": ` + qnameMsg}},
		{name: "bad finalizer", md: `{"name":"a","finalizers":["a/b/c"]}`,
			want: []string{`metadata.finalizers: Invalid value: "a/b/c": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`}},
		{name: "orphan and foreground", md: `{"name":"a","finalizers":["orphan","foregroundDeletion"]}`,
			want: []string{`metadata.finalizers: Invalid value: ["orphan","foregroundDeletion"]: finalizer orphan and foregroundDeletion cannot be both set`}},
		{name: "owner references", md: `{"name":"a","ownerReferences":[{"apiVersion":"v1","kind":"K","name":"o","uid":"u","controller":true},{"apiVersion":"g/","kind":"","name":"","uid":""},{"apiVersion":"v1","kind":"J","name":"p","uid":"v","controller":true}]}`,
			want: []string{
				`metadata.ownerReferences[1].apiVersion: Invalid value: "g/": version must not be empty`,
				`metadata.ownerReferences[1].kind: Invalid value: "": must not be empty`,
				`metadata.ownerReferences[1].name: Invalid value: "": must not be empty`,
				`metadata.ownerReferences[1].uid: Invalid value: "": must not be empty`,
				`metadata.ownerReferences: Invalid value: "K/o and J/p": Only one reference can have Controller set to true. Found "true" in references for K/o and J/p`,
			}},
		{name: "owner reference missing fields", md: `{"name":"a","ownerReferences":[{}]}`,
			want: []string{
				`metadata.ownerReferences[0].apiVersion: Invalid value: "": version must not be empty`,
				`metadata.ownerReferences[0].kind: Invalid value: "": must not be empty`,
				`metadata.ownerReferences[0].name: Invalid value: "": must not be empty`,
				`metadata.ownerReferences[0].uid: Invalid value: "": must not be empty`,
			}},
		{name: "managed fields", md: `{"name":"a","managedFields":[{"manager":"m","operation":"Apply","fieldsType":"FieldsV1","fieldsV1":{}},{"manager":"m","operation":"Patch","fieldsType":"FieldsV2"}]}`,
			want: []string{
				"metadata.managedFields[1].operation: Invalid value: \"Patch\": must be `Apply` or `Update`",
				"metadata.managedFields[1].fieldsType: Invalid value: \"FieldsV2\": must be `FieldsV1`",
			}},
		{name: "managed fields as raw JSON", md: `{"name":"a","managedFields":[{"manager":"m","operation":"Update","fieldsType":"FieldsV1"},{"manager":"n","operation":"Update","fieldsType":"FieldsV1"},{"manager":"o","operation":"Update","fieldsType":"FieldsV1"}]}`,
			raw: []json.RawMessage{json.RawMessage(` {"f:data":{}}`), json.RawMessage(`[]`), json.RawMessage(`{"f:data":`)},
			want: []string{
				`metadata.managedFields[1].fieldsV1: Invalid value: "array": metadata.managedFields[1].fieldsV1 in body must be of type object: "array"`,
				`metadata.managedFields[2].fieldsV1: Invalid value: "invalid JSON": metadata.managedFields[2].fieldsV1 in body must be of type object: "invalid JSON"`,
			}},
		{name: "wrong types", md: `{"name":5,"namespace":"ns","labels":"x","annotations":{"a":1},"finalizers":"f","generation":"1","ownerReferences":[{"uid":3}],"creationTimestamp":"yesterday","deletionGracePeriodSeconds":1.5}`, namespaced: true,
			want: []string{
				`metadata.name: Invalid value: "integer": metadata.name in body must be of type string: "integer"`,
				`metadata.generation: Invalid value: "string": metadata.generation in body must be of type integer: "string"`,
				`metadata.deletionGracePeriodSeconds: Invalid value: "number": metadata.deletionGracePeriodSeconds in body must be of type integer: "number"`,
				`metadata.creationTimestamp: Invalid value: "yesterday": must be an RFC 3339 date-time`,
				`metadata.labels: Invalid value: "string": metadata.labels in body must be of type object: "string"`,
				`metadata.annotations[a]: Invalid value: "integer": metadata.annotations[a] in body must be of type string: "integer"`,
				`metadata.finalizers: Invalid value: "string": metadata.finalizers in body must be of type array: "string"`,
				`metadata.ownerReferences[0].uid: Invalid value: "integer": metadata.ownerReferences[0].uid in body must be of type string: "integer"`,
			}},
		{name: "nulls are absent", md: `{"name":"a","labels":null,"generation":null,"finalizers":null}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			md := decode(t, tt.md)
			for i, raw := range tt.raw {
				md["managedFields"].([]any)[i].(map[string]any)["fieldsV1"] = raw
			}
			got := errStrings(ValidateObjectMeta(md, tt.namespaced, tt.rule, NewPath("metadata")))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestValidateAnnotationsSize(t *testing.T) {
	ann := map[string]string{"a": strings.Repeat("x", TotalAnnotationSizeLimit-1)}
	if errs := ValidateAnnotations(ann, NewPath("metadata", "annotations")); errs != nil {
		t.Errorf("at the limit: %v", errs)
	}
	ann["b"] = ""
	got := errStrings(ValidateAnnotations(ann, NewPath("metadata", "annotations")))
	want := []string{"metadata.annotations: Too long: may not be more than 262144 bytes"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("over the limit: %q", got)
	}
	// The same through ValidateObjectMeta, whose check of valid metadata
	// takes a shorter path.
	md := map[string]any{"name": "a", "annotations": map[string]any{"a": strings.Repeat("x", TotalAnnotationSizeLimit-1)}}
	if errs := ValidateObjectMeta(md, false, nil, NewPath("metadata")); errs != nil {
		t.Errorf("object at the limit: %v", errs)
	}
	md["annotations"].(map[string]any)["b"] = ""
	if got := errStrings(ValidateObjectMeta(md, false, nil, NewPath("metadata"))); !reflect.DeepEqual(got, want) {
		t.Errorf("object over the limit: %q", got)
	}
}

// TestValidateObjectMetaLabelsAsValidateLabels: ValidateObjectMeta checks
// valid labels and annotations without ValidateLabels and
// ValidateAnnotations; for keys and values just inside and just outside
// their limits it must report exactly what they report.
func TestValidateObjectMetaLabelsAsValidateLabels(t *testing.T) {
	keys := []string{"a", "A", "-a", "a-", "example.com/a", "Example.com/a", "example.com/", "/a", strings.Repeat("k", 63), strings.Repeat("k", 64),
		strings.Repeat("d", 253) + "/a", strings.Repeat("d", 254) + "/a", "a b", "a.b_c-d"}
	values := []string{"", "v", "-v", "v-", "v.v_v-v", strings.Repeat("v", 63), strings.Repeat("v", 64), "v v"}
	for _, k := range keys {
		for _, v := range values {
			labels, md := map[string]string{k: v, "ok": "ok"}, map[string]any{"name": "a", "labels": map[string]any{k: v, "ok": "ok"}}
			want := errStrings(ValidateLabels(labels, NewPath("metadata", "labels")))
			if got := errStrings(ValidateObjectMeta(md, false, nil, NewPath("metadata"))); !reflect.DeepEqual(got, want) {
				t.Errorf("labels %q: %q, ValidateLabels %q", labels, got, want)
			}
			ann, md := map[string]string{k: v}, map[string]any{"name": "a", "annotations": map[string]any{k: v}}
			want = errStrings(ValidateAnnotations(ann, NewPath("metadata", "annotations")))
			if got := errStrings(ValidateObjectMeta(md, false, nil, NewPath("metadata"))); !reflect.DeepEqual(got, want) {
				t.Errorf("annotations %q: %q, ValidateAnnotations %q", ann, got, want)
			}
		}
	}
}
