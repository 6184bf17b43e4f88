package library

import (
	"cmp"
	"errors"
	"math"
	"math/big"
)

// This file holds the two number representations a Kubernetes
// resource.Quantity switches between: a fast int64 mantissa with a base-10
// exponent, and an arbitrary-precision decimal. Which one a value is held in
// is observable from CEL (asInteger only succeeds on the int64 form,
// asApproximateFloat multiplies the mantissa by a power of ten), so kapi keeps
// the same two forms and moves between them at the same points Kubernetes
// does.

// errQuantityTooLarge is returned where Kubernetes would have to rescale a
// decimal by more than maxRescaleDigits powers of ten (for example
// quantity('1e2000000000')): Kubernetes attempts the multi-gigabyte
// computation, kapi refuses it.
var errQuantityTooLarge = errors.New("quantity exponent is out of the supported range")

// maxRescaleDigits bounds the powers of ten a non-zero decimal may be
// multiplied by (10^100000 is a 40 KiB number). Quantities that fit
// Kubernetes' documented range (2^63-1 at nano precision) need fewer than
// 40 digits.
const maxRescaleDigits = 100000

// int64Amount is value * 10^exp, the fast form of a quantity.
type int64Amount struct {
	value int64
	exp   int32
}

// decAmount is unscaled * 10^-scale (scale counts the digits after the
// decimal point, as in the inf.Dec type Kubernetes uses); unscaled is never
// nil and is never mutated once the amount is built.
type decAmount struct {
	unscaled *big.Int
	scale    int32
}

func (a int64Amount) sign() int {
	switch {
	case a.value > 0:
		return 1
	case a.value < 0:
		return -1
	}
	return 0
}

// asInt64 returns the amount at exponent 0, refusing fractions and overflow.
func (a int64Amount) asInt64() (int64, bool) {
	switch {
	case a.exp == 0:
		return a.value, true
	case a.exp < 0:
		return 0, false
	}
	return scaleUpInt64(a.value, a.exp)
}

func (a int64Amount) toDec() decAmount {
	return decAmount{unscaled: big.NewInt(a.value), scale: -a.exp}
}

// add returns a+b at the smaller exponent, or false on overflow (a is then
// to be added in decimal form).
func (a int64Amount) add(b int64Amount) (int64Amount, bool) {
	switch {
	case b.value == 0:
		return a, true
	case a.value == 0:
		return b, true
	case a.exp == b.exp:
		c, ok := addInt64(a.value, b.value)
		return int64Amount{value: c, exp: a.exp}, ok
	case a.exp > b.exp:
		c, ok := scaleUpInt64(a.value, a.exp-b.exp)
		if !ok {
			return a, false
		}
		c, ok = addInt64(c, b.value)
		return int64Amount{value: c, exp: b.exp}, ok
	default:
		c, ok := scaleUpInt64(b.value, b.exp-a.exp)
		if !ok {
			return a, false
		}
		c, ok = addInt64(a.value, c)
		return int64Amount{value: c, exp: a.exp}, ok
	}
}

// roundedUp returns the amount at exponent exp (>= a.exp), rounding away
// from zero, and whether that was exact.
func (a int64Amount) roundedUp(exp int32) (int64Amount, bool) {
	if a.exp >= exp {
		return a, true
	}
	v, exact := scaleDownInt64(a.value, exp-a.exp)
	return int64Amount{value: v, exp: exp}, exact
}

// addInt64 returns a+b or false on overflow.
func addInt64(a, b int64) (int64, bool) {
	c := a + b
	if (a > 0 && b > 0 && c < 0) || (a < 0 && b < 0 && c >= 0) {
		return 0, false
	}
	return c, true
}

// mulInt64 returns a*b or false on overflow.
func mulInt64(a, b int64) (int64, bool) {
	if a == 0 || b == 0 || a == 1 || b == 1 {
		return a * b, true
	}
	if a == math.MinInt64 || b == math.MinInt64 {
		return 0, false
	}
	c := a * b
	return c, c/b == a
}

// scaleUpInt64 returns v * 10^n (n >= 0) or false on overflow.
func scaleUpInt64(v int64, n int32) (int64, bool) {
	if v == 0 {
		return 0, true
	}
	var ok bool
	for ; n > 0; n-- {
		if v, ok = mulInt64(v, 10); !ok {
			return 0, false
		}
	}
	return v, true
}

// scaleDownInt64 divides v by 10^n (n > 0), rounding away from zero, and
// reports whether the division was exact.
func scaleDownInt64(v int64, n int32) (int64, bool) {
	r := v
	fraction := false
	for ; n > 0; n-- {
		if r%10 != 0 {
			fraction = true
		}
		r /= 10
		if r == 0 {
			break
		}
	}
	if !fraction {
		return r, true
	}
	if v > 0 {
		return r + 1, false
	}
	return r - 1, false
}

// pow10 returns 10^n as a big.Int, refusing exponents beyond
// maxRescaleDigits.
func pow10(n int64) (*big.Int, error) {
	if n < 0 || n > maxRescaleDigits {
		return nil, errQuantityTooLarge
	}
	return new(big.Int).Exp(big.NewInt(10), big.NewInt(n), nil), nil
}

func (d decAmount) sign() int { return d.unscaled.Sign() }

func (d decAmount) neg() decAmount {
	return decAmount{unscaled: new(big.Int).Neg(d.unscaled), scale: d.scale}
}

// rescaled returns d with the given (larger or equal) scale and the same
// value.
func (d decAmount) rescaled(scale int32) (decAmount, error) {
	if d.unscaled.Sign() == 0 {
		return decAmount{unscaled: new(big.Int), scale: scale}, nil
	}
	p, err := pow10(int64(scale) - int64(d.scale))
	if err != nil {
		return decAmount{}, err
	}
	return decAmount{unscaled: new(big.Int).Mul(d.unscaled, p), scale: scale}, nil
}

// aligned brings x and y to the larger of their scales, as inf.Dec does
// before adding or subtracting.
func aligned(x, y decAmount) (decAmount, decAmount, error) {
	var err error
	switch {
	case x.scale < y.scale:
		x, err = x.rescaled(y.scale)
	case y.scale < x.scale:
		y, err = y.rescaled(x.scale)
	}
	return x, y, err
}

func (d decAmount) add(o decAmount) (decAmount, error) {
	x, y, err := aligned(d, o)
	if err != nil {
		return decAmount{}, err
	}
	return decAmount{unscaled: new(big.Int).Add(x.unscaled, y.unscaled), scale: x.scale}, nil
}

// cmp compares exactly; operands of different signs or with far apart
// magnitudes are decided without rescaling.
func (d decAmount) cmp(o decAmount) int {
	ds, os := d.sign(), o.sign()
	if ds != os || ds == 0 {
		return cmp.Compare(ds, os)
	}
	// Compare the magnitudes by the position of the leading digit first.
	dl := int64(len(new(big.Int).Abs(d.unscaled).String())) - int64(d.scale)
	ol := int64(len(new(big.Int).Abs(o.unscaled).String())) - int64(o.scale)
	if dl != ol {
		return cmp.Compare(dl, ol) * ds
	}
	x, y, err := aligned(d, o)
	if err != nil {
		// Unreachable: equal leading-digit positions bound the rescale by the
		// digit counts of the operands.
		return 0
	}
	return x.unscaled.Cmp(y.unscaled)
}

// roundedUp returns d at the given scale, rounding away from zero, and
// whether that was exact (inf.Dec.Round with inf.RoundUp).
func (d decAmount) roundedUp(scale int32) (decAmount, bool, error) {
	if scale >= d.scale {
		r, err := d.rescaled(scale)
		return r, true, err
	}
	p, err := pow10(int64(d.scale) - int64(scale))
	if err != nil {
		return decAmount{}, false, err
	}
	q, m := new(big.Int).QuoRem(d.unscaled, p, new(big.Int))
	if m.Sign() == 0 {
		return decAmount{unscaled: q, scale: scale}, true, nil
	}
	q.Add(q, big.NewInt(int64(d.unscaled.Sign())))
	return decAmount{unscaled: q, scale: scale}, false, nil
}

// removeFactors divides v by base while it divides evenly, returning the
// quotient and the number of divisions (v == result * base^times).
func removeFactors(v, base *big.Int) (*big.Int, int32) {
	var times int32
	r := new(big.Int).Set(v)
	q, m := new(big.Int), new(big.Int)
	for r.Sign() != 0 {
		q.QuoRem(r, base, m)
		if m.Sign() != 0 {
			break
		}
		r, q = q, r
		times++
	}
	return r, times
}
