package meta

import (
	"encoding/json"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"
)

func TestPathString(t *testing.T) {
	var root *Path
	tests := []struct {
		path *Path
		want string
	}{
		{nil, ""},
		{NewPath("spec"), "spec"},
		{NewPath("spec", "ports"), "spec.ports"},
		{NewPath("spec").Child("ports").Index(2), "spec.ports[2]"},
		{NewPath("spec").Child("ports").Index(2).Child("name"), "spec.ports[2].name"},
		{NewPath("metadata").Child("labels").Key("app"), "metadata.labels[app]"},
		{NewPath("metadata", "labels").Key("example.com/x"), "metadata.labels[example.com/x]"},
		{root.Child("spec"), "spec"},
		{root.Index(0).Child("a"), "[0].a"},
		{NewPath("a").Index(0).Index(1), "a[0][1]"},
		{NewPath("a").Child("b", "c", "d"), "a.b.c.d"},
	}
	for _, tt := range tests {
		if got := tt.path.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}

func TestPathImmutable(t *testing.T) {
	parent := NewPath("spec")
	a := parent.Child("a")
	b := parent.Child("b")
	if parent.String() != "spec" || a.String() != "spec.a" || b.String() != "spec.b" {
		t.Fatalf("children share state: %s %s %s", parent, a, b)
	}
}

func TestFieldErrorMessages(t *testing.T) {
	p := NewPath("spec", "size")
	tests := []struct {
		err  *FieldError
		want string
		typ  CauseType
	}{
		{Invalid(p, int64(-1), "must be greater than or equal to 0"),
			"spec.size: Invalid value: -1: must be greater than or equal to 0", CauseTypeFieldValueInvalid},
		{Invalid(p, json.Number("-1"), "must be greater than or equal to 0"),
			"spec.size: Invalid value: -1: must be greater than or equal to 0", CauseTypeFieldValueInvalid},
		{Invalid(p, 1.5, "x"), "spec.size: Invalid value: 1.5: x", CauseTypeFieldValueInvalid},
		{Invalid(p, true, ""), "spec.size: Invalid value: true", CauseTypeFieldValueInvalid},
		{Invalid(p, nil, "x"), "spec.size: Invalid value: null: x", CauseTypeFieldValueInvalid},
		{Invalid(p, (*int)(nil), "x"), "spec.size: Invalid value: null: x", CauseTypeFieldValueInvalid},
		{Invalid(p, map[string]any{"a": json.Number("1")}, "x"), `spec.size: Invalid value: {"a":1}: x`, CauseTypeFieldValueInvalid},
		{Invalid(p, []any{"a", true}, "x"), `spec.size: Invalid value: ["a",true]: x`, CauseTypeFieldValueInvalid},
		{Required(NewPath("metadata", "name"), "name or generateName is required"),
			"metadata.name: Required value: name or generateName is required", CauseTypeFieldValueRequired},
		{Required(p, ""), "spec.size: Required value", CauseTypeFieldValueRequired},
		{NotSupported(NewPath("spec", "color"), "pink", []string{"red", "blue"}),
			`spec.color: Unsupported value: "pink": supported values: "red", "blue"`, CauseTypeFieldValueNotSupported},
		{NotSupported(NewPath("spec", "color"), "pink", nil),
			`spec.color: Unsupported value: "pink"`, CauseTypeFieldValueNotSupported},
		{TypeInvalid(p, "string", `spec.size in body must be of type integer: "string"`),
			`spec.size: Invalid value: "string": spec.size in body must be of type integer: "string"`, CauseTypeTypeInvalid},
		{Forbidden(NewPath("metadata", "namespace"), "not allowed on this type"),
			"metadata.namespace: Forbidden: not allowed on this type", CauseTypeFieldValueForbidden},
		{Duplicate(NewPath("spec", "tags").Index(1), "a"),
			`spec.tags[1]: Duplicate value: "a"`, CauseTypeFieldValueDuplicate},
		{TooLong(NewPath("metadata", "name"), "xxxx", 253),
			"metadata.name: Too long: may not be more than 253 bytes", CauseTypeFieldValueTooLong},
		{TooLong(p, "x", 1), "spec.size: Too long: may not be more than 1 byte", CauseTypeFieldValueTooLong},
		{TooLong(p, "x", -1), "spec.size: Too long: value is too long", CauseTypeFieldValueTooLong},
		{TooMany(NewPath("spec", "tags"), 5, 3), "spec.tags: Too many: 5: must have at most 3 items", CauseTypeTooMany},
		{TooMany(NewPath("spec", "tags"), -1, 1), "spec.tags: Too many: must have at most 1 item", CauseTypeTooMany},
		{TooMany(NewPath("spec", "tags"), 2, -1), "spec.tags: Too many: 2: has too many items", CauseTypeTooMany},
		{Internal(p, errors.New("boom")), "spec.size: Internal error: boom", CauseTypeInternal},
		{NotFound(NewPath("spec", "ref"), "x"), `spec.ref: Not found: "x"`, CauseTypeFieldValueNotFound},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q\nwant      %q", got, tt.want)
		}
		if tt.err.Type != tt.typ {
			t.Errorf("%q: Type = %q, want %q", tt.want, tt.err.Type, tt.typ)
		}
	}
}

func TestErrorListToCauses(t *testing.T) {
	var empty ErrorList
	if empty.ToCauses() != nil {
		t.Error("empty list should have no causes")
	}
	l := ErrorList{
		Required(NewPath("spec", "size"), ""),
		Invalid(NewPath("spec", "size"), int64(-1), "must be greater than or equal to 0"),
	}
	want := []StatusCause{
		{Type: CauseTypeFieldValueRequired, Message: "Required value", Field: "spec.size"},
		{Type: CauseTypeFieldValueInvalid, Message: "Invalid value: -1: must be greater than or equal to 0", Field: "spec.size"},
	}
	if got := l.ToCauses(); !reflect.DeepEqual(got, want) {
		t.Errorf("ToCauses() = %#v, want %#v", got, want)
	}
	b, err := json.Marshal(want[0])
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"reason":"FieldValueRequired","message":"Required value","field":"spec.size"}` {
		t.Errorf("cause JSON = %s", b)
	}
}

func TestErrorListToAggregate(t *testing.T) {
	if (ErrorList{}).ToAggregate() != nil {
		t.Error("empty list should aggregate to nil")
	}
	one := Required(NewPath("a"), "")
	if got := (ErrorList{one}).ToAggregate().Error(); got != "a: Required value" {
		t.Errorf("single = %q", got)
	}
	two := Invalid(NewPath("b"), "x", "bad")
	err := ErrorList{one, two, Required(NewPath("a"), "")}.ToAggregate()
	if got, want := err.Error(), `[a: Required value, b: Invalid value: "x": bad]`; got != want {
		t.Errorf("aggregate = %q, want %q", got, want)
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe != one {
		t.Errorf("errors.As did not find the first member")
	}
}

func TestStamps(t *testing.T) {
	var s Stamps
	base := time.Date(2026, 11, 22, 13, 4, 5, 0, time.FixedZone("x", 3600))
	for _, tc := range []struct {
		t    time.Time
		want string
	}{
		{base, "2026-11-22T12:04:05Z"},
		{base.Add(999 * time.Millisecond), "2026-11-22T12:04:05Z"},
		{base.Add(time.Second), "2026-11-22T12:04:06Z"},
		{base, "2026-11-22T12:04:05Z"},
		{time.Date(1969, 12, 31, 23, 59, 59, 500, time.UTC), "1969-12-31T23:59:59Z"},
	} {
		if got := s.Value(tc.t); got != tc.want {
			t.Errorf("Value(%v) = %v, want %s", tc.t, got, tc.want)
		}
		if want := NewTime(tc.t).Format(TimeFormat); s.Value(tc.t) != want {
			t.Errorf("Value(%v) differs from NewTime's %s", tc.t, want)
		}
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 1000 {
				tt := base.Add(time.Duration(i*1000+j) * time.Millisecond)
				if got, want := s.Value(tt), tt.UTC().Truncate(time.Second).Format(TimeFormat); got != want {
					t.Errorf("Value(%v) = %v, want %s", tt, got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}
