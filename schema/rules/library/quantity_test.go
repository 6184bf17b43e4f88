package library

import "testing"

func TestQuantity(t *testing.T) {
	run(t, []evalCase{
		{expr: `quantity('1.5G') == quantity('1500M')`, want: true},
		{expr: `quantity('200k') == quantity('200000')`, want: true},
		{expr: `quantity("12Mi") == quantity("12582912")`, want: true},
		{expr: `isQuantity('1.3G')`, want: true},
		{expr: `isQuantity('1.3Gi')`, want: true},
		{expr: `isQuantity('1,3G')`, want: false},
		{expr: `isQuantity('10000k')`, want: true},
		{expr: `isQuantity('200K')`, want: false},
		{expr: `isQuantity('Three')`, want: false},
		{expr: `isQuantity("20")`, want: true},
		{expr: `isQuantity("20M")`, want: true},
		{expr: `isQuantity("20Mo")`, want: false},
		{expr: `isQuantity("10Mm")`, want: false},
		{expr: `isQuantity("1e3")`, want: true},
		{expr: `isQuantity("100m")`, want: true},
		{expr: `quantity("500000G").isInteger()`, want: true},
		{expr: `quantity("50000000G").isInteger()`, want: true},
		{expr: `quantity("50k").isInteger()`, want: true},
		{expr: `quantity("9999999999999999999999999999999999999G").isInteger()`, want: false},
		{expr: `quantity("1.5").isInteger()`, want: false},
		{expr: `quantity("50k").asInteger()`, want: 50000},
		{expr: `quantity("50k").asInteger() == 50000`, want: true},
		{expr: `quantity("9999999999999999999999999999999999999G").asApproximateFloat()`, want: 1.0000000000000001e46},
		{expr: `quantity("50.703k").asApproximateFloat()`, want: 50703.0},
		{expr: `quantity("50k").sub(20000).asApproximateFloat() == 30000.0`, want: true},
		{expr: `quantity("50k").add(quantity("20k")) == quantity("70k")`, want: true},
		{expr: `quantity("70k") == quantity("50k").add(quantity("20k"))`, want: true},
		{expr: `quantity("50k").add(20) == quantity("50020")`, want: true},
		{expr: `quantity("50k").add(quantity("20")) == quantity("50.02k")`, want: true},
		{expr: `quantity("50k").add(20).isLessThan(quantity("50020"))`, want: false},
		{expr: `quantity("50k").sub(quantity("20k")) == quantity("30k")`, want: true},
		{expr: `quantity("50k").sub(quantity("20")) == quantity("49.98k")`, want: true},
		{expr: `quantity("50k").sub(20000) == quantity("30k")`, want: true},
		{expr: `quantity("50k").sub(20) == quantity("49980")`, want: true},
		{expr: `quantity("50k").add(20).sub(quantity("100k")).asInteger()`, want: -49980},
		{expr: `quantity("50k").add(20).sub(quantity("100k")).sub(-50000) == quantity("20")`, want: true},
		{expr: `quantity("50k").add(20).sub(quantity("100k")).sub(-50000).asInteger()`, want: 20},
		{expr: `quantity("200M").compareTo(quantity("0.2G"))`, want: 0},
		{expr: `quantity("50M").compareTo(quantity("50Mi"))`, want: -1},
		{expr: `quantity("50Mi").compareTo(quantity("50M"))`, want: 1},
		{expr: `quantity("150Mi").isGreaterThan(quantity("100Mi"))`, want: true},
		{expr: `quantity("50Mi").isGreaterThan(quantity("100Mi"))`, want: false},
		{expr: `quantity("50Mi").isGreaterThan(quantity("50M"))`, want: true},
		{expr: `quantity("50M").isLessThan(quantity("100M"))`, want: true},
		{expr: `quantity("100M").isLessThan(quantity("50M"))`, want: false},
		{expr: `quantity("50M").isLessThan(quantity("50Mi"))`, want: true},
		{expr: `quantity("200M") == quantity("0.2G") && quantity("0.2G") == quantity("200M")`, want: true},
		{expr: `quantity("2M") == quantity("0.002G") && quantity("2000k") == quantity("2M")`, want: true},
		{expr: `quantity("200M") == quantity("0.3G")`, want: false},
		{expr: `sign(quantity("-5"))`, want: -1},
		{expr: `sign(quantity("0"))`, want: 0},
		{expr: `sign(quantity("5m"))`, want: 1},
		// Finer than nano is rounded up; the cap applies to binary SI only.
		{expr: `quantity("0.1n") == quantity("1n")`, want: true},
		{expr: `quantity("-0.1n") == quantity("-1n")`, want: true},
		{expr: `quantity("100000000000000000000Ei") == quantity("9223372036854775807")`, want: true},
		// Adding does not change the receiver.
		{expr: `[quantity("9999999999999999999999999999999999999")].all(x, x.add(quantity("1")).compareTo(x.add(quantity("2"))) == -1)`, want: true},
		// Kubernetes' quirks: a bare suffix parses as zero, 1.5Gi is held as
		// a decimal and so is not an integer.
		{expr: `quantity("Mi") == quantity("0")`, want: true},
		{expr: `quantity("1.5Gi").isInteger()`, want: false},
		{expr: `quantity("1Gi").asInteger()`, want: 1073741824},
		// Errors.
		{expr: `quantity("10Mo")`, evalErr: `^quantities must match the regular expression '\^\(\[\+-\]\?\[0-9\.\]\+\)\(\[eEinumkKMGTP\]\*\[-\+\]\?\[0-9\]\*\)\$'$`},
		{expr: `quantity("10Mm")`, evalErr: `^unable to parse quantity's suffix$`},
		{expr: `quantity("200K")`, evalErr: `^unable to parse quantity's suffix$`},
		{expr: `quantity("Three")`, evalErr: `^quantities must match the regular expression`},
		{expr: `quantity("")`, evalErr: `^quantities must match the regular expression`},
		{expr: `quantity("9999999999999999999999999999999999999G").asInteger()`, evalErr: `^cannot convert value to integer$`},
		{expr: `quantity("1e2000000000").add(quantity("1"))`, evalErr: `out of the supported range`},
		{expr: `isQuantity([1, 2, 3])`, compileErr: `found no matching overload for 'isQuantity'`},
		// sign is a global function in Kubernetes, not a member.
		{expr: `quantity("1").sign()`, compileErr: `found no matching overload for 'sign'`},
	})
}

// TestQuantityString checks the canonical form against Kubernetes'
// documented examples and the cases of its own tests.
func TestQuantityString(t *testing.T) {
	for in, want := range map[string]string{
		"1.5": "1500m", "1.5Gi": "1536Mi", "0.5Gi": "512Mi", "1024": "1024",
		"1Ki": "1Ki", "1024Ki": "1Mi", "1000k": "1M", "0.001": "1m", "1e3": "1e3",
		"1.1Ki": "1126400m", "100000000000000000000Ei": "9223372036854775807", "-1.5": "-1500m",
		"0.5Ki": "512", "1000E": "1", "7e-1": "700e-3", "-0": "0",
	} {
		q, err := parseQuantity(in)
		if err != nil {
			t.Fatalf("parseQuantity(%q): %v", in, err)
		}
		if got := q.String(); got != want {
			t.Errorf("parseQuantity(%q).String() = %q, want %q", in, got, want)
		}
	}
}
