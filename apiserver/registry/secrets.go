package registry

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
)

// The secret types Kubernetes defines and the data keys it checks for them.
const (
	SecretTypeOpaque              = "Opaque"
	SecretTypeServiceAccountToken = "kubernetes.io/service-account-token"
	SecretTypeDockercfg           = "kubernetes.io/dockercfg"
	SecretTypeDockerConfigJSON    = "kubernetes.io/dockerconfigjson"
	SecretTypeBasicAuth           = "kubernetes.io/basic-auth"
	SecretTypeSSHAuth             = "kubernetes.io/ssh-auth"
	SecretTypeTLS                 = "kubernetes.io/tls"
	SecretTypeBootstrapToken      = "bootstrap.kubernetes.io/token"
)

// maxSecretSize is the limit of a secret's decoded data, as Kubernetes'
// core.MaxSecretSize.
const maxSecretSize = 1 << 20

// secretMessage is core/v1 Secret, wire-compatible with k8s.io/api's
// generated.proto.
var secretMessage = codec.MustMessage("Secret",
	codec.Field{Name: "metadata", Number: 1, Kind: codec.MessageKind, Message: codec.ObjectMetaMessage},
	codec.Field{Name: "data", Number: 2, Kind: codec.Bytes, Map: true},
	codec.Field{Name: "type", Number: 3, Kind: codec.String},
	codec.Field{Name: "stringData", Number: 4, Kind: codec.String, Map: true},
	codec.Field{Name: "immutable", Number: 5, Kind: codec.Bool, Keep: true},
)

// Secrets returns the core v1 secrets resource as kube-apiserver serves it:
// data is base64 (a body where it is not is a 400, as kube-apiserver's
// decoding answers), stringData is merged into data on every write and never
// stored or returned, type defaults to Opaque and never changes, the
// well-known types must have their keys, data keys are configmap keys, 1 MiB
// in total, and immutable: true freezes data.
func Secrets() Resource {
	return Resource{
		Version:    "v1",
		Resource:   "secrets",
		Kind:       "Secret",
		Namespaced: true,
		Schema: mustSchema(`{"type":"object","description":"Secret holds secret data of a certain type. The total bytes of the values in the Data field must be less than MaxSecretSize bytes.","properties":{` + typeMetaProps + `,
"data":{"type":"object","additionalProperties":{"type":"string","format":"byte"},"description":"Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here."},
"stringData":{"type":"object","additionalProperties":{"type":"string"},"description":"stringData allows specifying non-binary secret data in string form. It is provided as a write-only input field for convenience. All keys and values are merged into the data field on write, overwriting any existing values. The stringData field is never output when reading from the API."},
"type":{"type":"string","description":"Used to facilitate programmatic handling of secret data."},
"immutable":{"type":"boolean","description":"Immutable, if set to true, ensures that data stored in the Secret cannot be updated (only object metadata can be modified)."}}}`),
		Protobuf:         secretMessage,
		SelectableFields: []string{".type"},
		PrinterColumns: []Column{
			{Name: "Type", Type: "string", JSONPath: ".type", Description: "Used to facilitate programmatic handling of secret data."},
			{Name: "Data", Type: "integer", DefinitionType: "string", Description: "The number of keys in data.", Value: func(obj Object) any {
				d, _ := obj["data"].(map[string]any)
				return len(d)
			}},
			ageColumn,
		},
		Options: builtinOptions("data"),
		Strategy: Strategy{
			CheckBody: checkSecretBody,
			Validate:  func(_ context.Context, obj Object) meta.ErrorList { return validateSecret(obj) },
			ValidateUpdate: func(_ context.Context, obj, old Object) meta.ErrorList {
				var errs meta.ErrorList
				if t, ot := obj["type"], old["type"]; t != ot {
					errs = append(errs, meta.Invalid(meta.NewPath("type"), t, "field is immutable"))
				}
				errs = append(errs, immutableDataErrors(obj, old, "data")...)
				return append(errs, validateSecret(obj)...)
			},
		}.prepareEveryWrite(prepareSecret),
	}
}

// DecodeError is kube-apiserver's answer to a body that does not decode into
// the Go struct of a built-in type of kind in version: 400 Bad Request.
func DecodeError(kind, version string, err error) *meta.StatusError {
	return meta.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", kind, version, kind, err))
}

// checkSecretBody refuses what Kubernetes' Secret struct cannot hold: data
// values that are not base64 strings, stringData values that are not strings.
func checkSecretBody(obj Object) error {
	for _, f := range []string{"data", "stringData"} {
		m, ok := obj[f].(map[string]any)
		if !ok {
			continue
		}
		for _, k := range meta.SortedKeys(m) {
			switch v := m[k].(type) {
			case nil:
			case string:
				if f == "data" {
					if _, err := base64.StdEncoding.DecodeString(v); err != nil {
						return DecodeError("Secret", "v1", err)
					}
				}
			default:
				goType := "string"
				if f == "data" {
					goType = "[]uint8"
				}
				return DecodeError("Secret", "v1", fmt.Errorf("json: cannot unmarshal %s into Go struct field Secret.%s of type %s", jsonTypeName(v), f, goType))
			}
		}
	}
	return nil
}

// jsonTypeName names a decoded JSON value's type as encoding/json's errors do.
func jsonTypeName(v any) string {
	switch v.(type) {
	case bool:
		return "bool"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	}
	return "number"
}

// prepareSecret merges stringData into data (stringData wins, as
// Kubernetes' conversion does) and drops it, and defaults type to Opaque.
func prepareSecret(obj Object) {
	if sd, ok := obj["stringData"].(map[string]any); ok && len(sd) > 0 {
		old, _ := obj["data"].(map[string]any)
		data := make(map[string]any, len(old)+len(sd))
		for k, v := range old {
			data[k] = v
		}
		for k, v := range sd {
			if s, ok := v.(string); ok {
				data[k] = base64.StdEncoding.EncodeToString([]byte(s))
			}
		}
		obj["data"] = data
	}
	delete(obj, "stringData")
	if t, _ := obj["type"].(string); t == "" {
		obj["type"] = SecretTypeOpaque
	}
}

// secretValue is the decoded value of data[key].
func secretValue(data map[string]any, key string) ([]byte, bool) {
	v, ok := data[key]
	if !ok {
		return nil, false
	}
	s, _ := v.(string)
	b, _ := base64.StdEncoding.DecodeString(s)
	return b, true
}

// validateSecret is Kubernetes' ValidateSecret beyond metadata.
func validateSecret(obj Object) meta.ErrorList {
	var errs meta.ErrorList
	data, _ := obj["data"].(map[string]any)
	dataPath := meta.NewPath("data")
	total := 0
	for _, k := range meta.SortedKeys(data) {
		if msg := configMapKeyProblem(k); msg != "" {
			errs = append(errs, meta.Invalid(dataPath.Key(k), k, msg))
		}
		b, _ := secretValue(data, k)
		total += len(b)
	}
	if total > maxSecretSize {
		errs = append(errs, meta.TooLong(dataPath, "", maxSecretSize))
	}
	jsonKey := func(key string) {
		b, ok := secretValue(data, key)
		if !ok {
			errs = append(errs, meta.Required(dataPath.Key(key), ""))
			return
		}
		if err := json.Unmarshal(b, &map[string]any{}); err != nil {
			errs = append(errs, meta.Invalid(dataPath.Key(key), "<secret contents redacted>", err.Error()))
		}
	}
	switch t, _ := obj["type"].(string); t {
	case SecretTypeServiceAccountToken:
		// Only the service account's name is required; its uid and the
		// token come later from a controller.
		const nameKey = "kubernetes.io/service-account.name"
		if s, _, _ := meta.NestedString(obj, "metadata", "annotations", nameKey); s == "" {
			errs = append(errs, meta.Required(meta.NewPath("metadata", "annotations").Key(nameKey), ""))
		}
	case SecretTypeDockercfg:
		jsonKey(".dockercfg")
	case SecretTypeDockerConfigJSON:
		jsonKey(".dockerconfigjson")
	case SecretTypeBasicAuth:
		// Either may be empty, but one must be there.
		_, user := data["username"]
		_, pass := data["password"]
		if !user && !pass {
			errs = append(errs, meta.Required(dataPath.Key("username"), ""), meta.Required(dataPath.Key("password"), ""))
		}
	case SecretTypeSSHAuth:
		if b, _ := secretValue(data, "ssh-privatekey"); len(b) == 0 {
			errs = append(errs, meta.Required(dataPath.Key("ssh-privatekey"), ""))
		}
	case SecretTypeTLS:
		for _, k := range []string{"tls.crt", "tls.key"} {
			if _, ok := data[k]; !ok {
				errs = append(errs, meta.Required(dataPath.Key(k), ""))
			}
		}
	}
	return errs
}
