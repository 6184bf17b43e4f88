package registry

import (
	"encoding/json"
	"testing"
)

type spokeNumbersV1 struct {
	N int64   `json:"n"`
	F float64 `json:"f"`
}

type spokeNumbersV2 struct {
	Count int64   `json:"count"`
	Ratio float64 `json:"ratio"`
}

// TypedSpoke takes integers written as integral floats, which the schema
// accepts for type integer, and keeps integers beyond 2^53 exact.
func TestTypedSpokeNumbers(t *testing.T) {
	sp := TypedSpoke(
		func(src *spokeNumbersV2, dst *spokeNumbersV1) error { dst.N, dst.F = src.Count, src.Ratio; return nil },
		func(src *spokeNumbersV1, dst *spokeNumbersV2) error { dst.Count, dst.Ratio = src.N, src.F; return nil },
	)
	for _, tc := range []struct{ n, f, wantN, wantF string }{
		{"1.0", "0.5", "1", "0.5"},
		{"1e3", "2", "1000", "2"},
		{"-0", "1.5e0", "0", "1.5"},
		{"9007199254740993", "0.1", "9007199254740993", "0.1"},
		{"-9223372036854775808", "1e300", "-9223372036854775808", "1e+300"},
	} {
		out, err := sp.FromHub(Object{"n": json.Number(tc.n), "f": json.Number(tc.f)})
		if err != nil {
			t.Errorf("n=%s f=%s: %v", tc.n, tc.f, err)
			continue
		}
		if out["count"] != json.Number(tc.wantN) || out["ratio"] != json.Number(tc.wantF) {
			t.Errorf("n=%s f=%s converted to count %#v ratio %#v, want %s and %s", tc.n, tc.f, out["count"], out["ratio"], tc.wantN, tc.wantF)
		}
	}
	// Not an integer: the conversion fails (the schema refuses such a value
	// for an integer field).
	if _, err := sp.FromHub(Object{"n": json.Number("1.5")}); err == nil {
		t.Error("n=1.5 converted into an int64 field")
	}
}
