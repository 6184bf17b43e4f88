package library

import (
	"math"
	"math/big"
	"strconv"
)

// The arithmetic and formatting of Quantity. Every operation keeps the
// representation Kubernetes would end up with (int64 form while it fits,
// decimal form after), since asInteger and asApproximateFloat depend on it.

// newIntQuantity is the quantity of an integer, as the CEL add(int) and
// sub(int) overloads build it (resource.NewQuantity(v, DecimalExponent)).
func newIntQuantity(v int64) quantity {
	return quantity{i: int64Amount{value: v}, format: decimalExponent}
}

// decimal returns q in decimal form.
func (q quantity) decimal() decAmount {
	if q.dec != nil {
		return *q.dec
	}
	return q.i.toDec()
}

// Sign returns -1, 0 or 1.
func (q quantity) Sign() int {
	if q.dec != nil {
		return q.dec.sign()
	}
	return q.i.sign()
}

// IsZero reports whether q is zero.
func (q quantity) IsZero() bool { return q.Sign() == 0 }

// Cmp compares q with o exactly: -1, 0 or 1.
func (q quantity) Cmp(o quantity) int {
	return q.decimal().cmp(o.decimal())
}

// AsInt64 returns q as an int64 when q is held in int64 form and is a whole
// number that fits; a quantity held in decimal form (for example one parsed
// from "1.5Gi") never converts, as in Kubernetes.
func (q quantity) AsInt64() (int64, bool) {
	if q.dec != nil {
		return 0, false
	}
	return q.i.asInt64()
}

// AsApproximateFloat64 returns the mantissa as a float64 times a power of
// ten, with Kubernetes' rounding (and its ±Inf beyond the float64 range).
func (q quantity) AsApproximateFloat64() float64 {
	var base float64
	var exp int
	if q.dec != nil {
		base, _ = big.NewFloat(0).SetInt(q.dec.unscaled).Float64()
		exp = -int(q.dec.scale)
	} else {
		base = float64(q.i.value)
		exp = int(q.i.exp)
	}
	if exp == 0 {
		return base
	}
	return base * math.Pow10(exp)
}

// Add returns q+y. A zero receiver takes y's format; the sum stays in int64
// form while both operands are in it and the sum fits.
func (q quantity) Add(y quantity) (quantity, error) {
	r := q
	r.text = ""
	if q.dec == nil && y.dec == nil {
		if q.i.value == 0 {
			r.format = y.format
		}
		if s, ok := q.i.add(y.i); ok {
			r.i = s
			return r, nil
		}
	} else if q.IsZero() {
		r.format = y.format
	}
	return r.withDecimal(q.decimal().add(y.decimal()))
}

// Sub returns q-y, with the format and representation rules of Add. Like
// Kubernetes it negates y's int64 mantissa without an overflow check.
func (q quantity) Sub(y quantity) (quantity, error) {
	r := q
	r.text = ""
	if q.IsZero() {
		r.format = y.format
	}
	if q.dec == nil && y.dec == nil {
		if s, ok := q.i.add(int64Amount{value: -y.i.value, exp: y.i.exp}); ok {
			r.i = s
			return r, nil
		}
	}
	return r.withDecimal(q.decimal().add(y.decimal().neg()))
}

func (q quantity) withDecimal(d decAmount, err error) (quantity, error) {
	if err != nil {
		return quantity{}, err
	}
	q.dec, q.i = &d, int64Amount{}
	return q, nil
}

// String returns the canonical form Kubernetes serializes a quantity in:
// the largest exponent (a multiple of three, or of 1024 for binary SI) that
// loses no precision, with the suffix of the quantity's format.
func (q quantity) String() string {
	if q.text != "" {
		return q.text
	}
	if q.IsZero() {
		return "0"
	}
	format := q.format
	var whole quantity
	if format == binarySI {
		if q.Cmp(newIntQuantity(-1024)) > 0 && q.Cmp(newIntQuantity(1024)) < 0 {
			format = decimalSI
		} else if r, exact := q.roundedUp(0); exact {
			whole = r
		} else {
			format = decimalSI
		}
	}
	if format == binarySI {
		number, exp := whole.canonicalBase1024()
		return number + binarySuffix(exp*10)
	}
	number, exp := q.canonicalBase10()
	return number + decimalSuffix(exp, format)
}

// roundedUp returns q at exponent exp, rounding away from zero, keeping its
// representation, and whether no precision was lost.
func (q quantity) roundedUp(exp int32) (quantity, bool) {
	if q.dec == nil {
		r, exact := q.i.roundedUp(exp)
		return quantity{i: r, format: q.format}, exact
	}
	d, exact, err := q.dec.roundedUp(-exp)
	if err != nil {
		return q, false
	}
	return quantity{dec: &d, format: q.format}, exact
}

// canonicalBase10 returns the mantissa and base-10 exponent (a multiple of
// three) with the trailing zeros moved into the exponent.
func (q quantity) canonicalBase10() (string, int32) {
	if q.dec == nil {
		v, times := removeInt64Factors(q.i.value, 10)
		exp := q.i.exp + times
		var ok bool
		switch exp % 3 {
		case 1, -2:
			if v, ok = mulInt64(v, 10); ok {
				return strconv.FormatInt(v, 10), exp - 1
			}
		case 2, -1:
			if v, ok = mulInt64(v, 100); ok {
				return strconv.FormatInt(v, 10), exp - 2
			}
		default:
			return strconv.FormatInt(v, 10), exp
		}
	}
	d := q.decimal()
	m, times := removeFactors(d.unscaled, big.NewInt(10))
	exp := -d.scale + times
	for exp%3 != 0 {
		m.Mul(m, big.NewInt(10))
		exp--
	}
	return m.String(), exp
}

// canonicalBase1024 returns the mantissa and base-1024 exponent of a whole
// quantity.
func (q quantity) canonicalBase1024() (string, int32) {
	if q.dec == nil {
		if v, ok := q.i.asInt64(); ok {
			m, times := removeInt64Factors(v, 1024)
			return strconv.FormatInt(m, 10), times
		}
	}
	d, _, err := q.decimal().roundedUp(0)
	if err != nil {
		return "0", 0
	}
	m, times := removeFactors(d.unscaled, big.NewInt(1024))
	return m.String(), times
}

// removeInt64Factors divides v by base while it divides evenly, on the
// magnitude (v == result * base^times).
func removeInt64Factors(v, base int64) (int64, int32) {
	neg := v < 0
	if neg {
		v = -v
	}
	var times int32
	for v >= base && v%base == 0 {
		v /= base
		times++
	}
	if neg {
		v = -v
	}
	return v, times
}

// decimalSuffix is the suffix of a base-10 exponent in a decimal format;
// like Kubernetes it is empty for an exponent with no SI prefix.
func decimalSuffix(exp int32, format quantityFormat) string {
	if format == decimalExponent {
		if exp == 0 {
			return ""
		}
		return "e" + strconv.FormatInt(int64(exp), 10)
	}
	switch exp {
	case -9:
		return "n"
	case -6:
		return "u"
	case -3:
		return "m"
	case 3:
		return "k"
	case 6:
		return "M"
	case 9:
		return "G"
	case 12:
		return "T"
	case 15:
		return "P"
	case 18:
		return "E"
	}
	return ""
}

// binarySuffix is the binary-SI suffix of a power-of-two exponent.
func binarySuffix(exp int32) string {
	if exp%10 != 0 || exp < 10 || exp > 60 {
		return ""
	}
	return string("KMGTPE"[exp/10-1]) + "i"
}
