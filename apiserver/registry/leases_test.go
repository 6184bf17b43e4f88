package registry

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// TestLeaseTimes: acquireTime and renewTime are stored as MicroTime marshals
// them (UTC, six fractional digits) and keep their microseconds; a time
// that does not parse is kube-apiserver's 400.
func TestLeaseTimes(t *testing.T) {
	ctx := context.Background()
	st := newBuiltinStore(t, Leases())
	res, err := st.Create(ctx, "ns1", mustObject(t, `{"metadata":{"name":"l1"},"spec":{"holderIdentity":"a","leaseDurationSeconds":15,
		"acquireTime":"2026-03-04T05:06:07.123456Z","renewTime":"2026-03-04T07:06:07.987654321+02:00","leaseTransitions":0}}`), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := res.Object["spec"].(map[string]any)
	if spec["acquireTime"] != "2026-03-04T05:06:07.123456Z" || spec["renewTime"] != "2026-03-04T05:06:07.987654Z" {
		t.Errorf("times %v %v", spec["acquireTime"], spec["renewTime"])
	}
	res, err = st.Update(ctx, "ns1", "l1", mustObject(t, `{"metadata":{"name":"l1","resourceVersion":"`+res.Object["metadata"].(map[string]any)["resourceVersion"].(string)+`"},
		"spec":{"holderIdentity":"a","renewTime":"2026-03-04T05:06:08Z"}}`), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Object["spec"].(map[string]any)["renewTime"]; got != "2026-03-04T05:06:08.000000Z" {
		t.Errorf("renewTime %v", got)
	}
	_, err = st.Create(ctx, "ns1", mustObject(t, `{"metadata":{"name":"l2"},"spec":{"leaseDurationSeconds":2147483648}}`), WriteOptions{})
	wantStatus(t, "int32", err, 400, `Lease in version "v1" cannot be handled as a Lease: json: cannot unmarshal number 2147483648 into Go struct field LeaseSpec.spec.leaseDurationSeconds of type int32`)
	_, err = st.Create(ctx, "ns1", mustObject(t, `{"metadata":{"name":"l2"},"spec":{"renewTime":"yesterday"}}`), WriteOptions{})
	wantStatus(t, "bad time", err, 400, `Lease in version "v1" cannot be handled as a Lease: parsing time "yesterday" as "2006-01-02T15:04:05.999999999Z07:00": cannot parse "yesterday" as "2006"`)
}

// TestLeaseValidation: Kubernetes' ValidateLeaseSpec, and no update without
// a resourceVersion (leases do not allow unconditional updates).
func TestLeaseValidation(t *testing.T) {
	ctx := context.Background()
	st := newBuiltinStore(t, Leases())
	for i, tc := range []struct {
		spec string
		want []string
	}{
		{`{"holderIdentity":"","leaseDurationSeconds":1,"leaseTransitions":0}`, nil},
		{`{"leaseDurationSeconds":0,"leaseTransitions":-1}`, []string{"spec.leaseDurationSeconds FieldValueInvalid", "spec.leaseTransitions FieldValueInvalid"}},
		{`{"strategy":"OldestEmulationVersion","preferredHolder":"b"}`, nil},
		{`{"strategy":"example.com/mine"}`, nil},
		{`{"strategy":"Newest"}`, []string{"spec.strategy FieldValueNotSupported"}},
		{`{"strategy":"a/b/c"}`, []string{"spec.strategy FieldValueInvalid"}},
		{`{"preferredHolder":"b"}`, []string{"spec.preferredHolder FieldValueForbidden"}},
	} {
		body := `{"metadata":{"generateName":"l-"},"spec":` + tc.spec + `}`
		_, err := st.Create(ctx, "ns1", mustObject(t, body), WriteOptions{DryRun: true})
		if tc.want == nil {
			if err != nil {
				t.Errorf("%d %s: %v", i, body, err)
			}
			continue
		}
		se := wantStatus(t, body, err, 422, "")
		if got := causes(se); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%d %s: causes %q, want %q", i, body, got, tc.want)
		}
	}
	if _, err := st.Create(ctx, "ns1", mustObject(t, `{"metadata":{"name":"l1"},"spec":{}}`), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := st.Update(ctx, "ns1", "l1", mustObject(t, `{"metadata":{"name":"l1"},"spec":{"holderIdentity":"x"}}`), WriteOptions{})
	wantStatus(t, "unconditional update", err, 422, "")
}

// TestLeaseProtobuf: the message reads and writes coordination/v1 Lease's
// wire form, built here by hand from generated.proto's field numbers, with
// MicroTime's microseconds and explicit zero values of pointer fields.
func TestLeaseProtobuf(t *testing.T) {
	renew := time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC)
	micro := func(tm time.Time) []byte {
		var b []byte
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(tm.Unix()))
		b = protowire.AppendTag(b, 2, protowire.VarintType)
		return protowire.AppendVarint(b, uint64(tm.Nanosecond()))
	}
	var spec []byte
	spec = protowire.AppendTag(spec, 1, protowire.BytesType)
	spec = protowire.AppendString(spec, "") // holderIdentity: "" (a *string)
	spec = protowire.AppendTag(spec, 2, protowire.VarintType)
	spec = protowire.AppendVarint(spec, 15)
	spec = protowire.AppendTag(spec, 3, protowire.BytesType)
	spec = protowire.AppendBytes(spec, micro(renew.Add(-time.Hour)))
	spec = protowire.AppendTag(spec, 4, protowire.BytesType)
	spec = protowire.AppendBytes(spec, micro(renew))
	spec = protowire.AppendTag(spec, 5, protowire.VarintType)
	spec = protowire.AppendVarint(spec, 0)
	spec = protowire.AppendTag(spec, 6, protowire.BytesType)
	spec = protowire.AppendString(spec, "OldestEmulationVersion")
	spec = protowire.AppendTag(spec, 7, protowire.BytesType)
	spec = protowire.AppendString(spec, "b")
	var wire []byte
	wire = protowire.AppendTag(wire, 1, protowire.BytesType)
	wire = protowire.AppendBytes(wire, protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "l1"))
	wire = protowire.AppendTag(wire, 2, protowire.BytesType)
	wire = protowire.AppendBytes(wire, spec)

	got, err := leaseMessage.Unmarshal(wire)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"metadata": map[string]any{"name": "l1"},
		"spec": map[string]any{"holderIdentity": "", "leaseDurationSeconds": json.Number("15"),
			"acquireTime": "2026-03-04T04:06:07.123456Z", "renewTime": "2026-03-04T05:06:07.123456Z",
			"leaseTransitions": json.Number("0"), "strategy": "OldestEmulationVersion", "preferredHolder": "b"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %#v\nwant %#v", got, want)
	}
	// From the JSON the server stores back to the same message.
	js := `{"metadata":{"name":"l1"},"spec":{"holderIdentity":"","leaseDurationSeconds":15,"acquireTime":"2026-03-04T04:06:07.123456Z","renewTime":"2026-03-04T05:06:07.123456Z","leaseTransitions":0,"strategy":"OldestEmulationVersion","preferredHolder":"b"}}`
	again, err := leaseMessage.AppendProtobuf(nil, []byte(js))
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(wire) {
		t.Errorf("encoded %x\nwant    %x", again, wire)
	}
}

// TestLeaseCreateOnUpdate: a PUT without resourceVersion creates a missing
// lease, as kube-apiserver's lease strategy allows (client-go's lease lock
// creates with POST, other clients with PUT); one with a resourceVersion
// is a 404.
func TestLeaseCreateOnUpdate(t *testing.T) {
	ctx := context.Background()
	st := newBuiltinStore(t, Leases())
	res, err := st.Update(ctx, "ns1", "l1", mustObject(t, `{"metadata":{"name":"l1"},"spec":{"holderIdentity":"a"}}`), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Created || res.Object["spec"].(map[string]any)["holderIdentity"] != "a" {
		t.Fatalf("created %v, object %v", res.Created, res.Object)
	}
	res, err = st.Update(ctx, "ns1", "l1", mustObject(t, `{"metadata":{"name":"l1","resourceVersion":"`+res.Object["metadata"].(map[string]any)["resourceVersion"].(string)+`"},"spec":{"holderIdentity":"b"}}`), WriteOptions{})
	if err != nil || res.Created {
		t.Fatalf("update: created %v, %v", res != nil && res.Created, err)
	}
	_, err = st.Update(ctx, "ns1", "l2", mustObject(t, `{"metadata":{"name":"l2","resourceVersion":"7"},"spec":{}}`), WriteOptions{})
	wantStatus(t, "missing lease with a resourceVersion", err, 404, "")
}

// A lease created without a spec has an empty one, as kube-apiserver's
// Lease (whose spec is a struct, not a pointer) always has.
func TestLeaseEmptySpec(t *testing.T) {
	st := newBuiltinStore(t, Leases())
	res, err := st.Create(context.Background(), "ns1", mustObject(t, `{"metadata":{"name":"l0"}}`), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if spec, ok := res.Object["spec"].(map[string]any); !ok || len(spec) != 0 {
		t.Fatalf("spec %v, want {}", res.Object["spec"])
	}
}
