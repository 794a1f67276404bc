package cpu

import "math"

// expf is the Go twin of exp_f32 in vec.c, for loops that stay in Go: a
// float32 exponential accurate to about 1 ulp, several times faster
// than math.Exp: x = n·ln2 + r with |r| ≤ ln2/2 (ln2 split in two parts so
// the reduction is exact), e^r by its degree-6 Taylor polynomial (truncation
// error |r|⁷/7! < 1.2e-7 relative), and 2ⁿ assembled in the exponent bits.
func expf(x float32) float32 {
	switch {
	case x != x:
		return x
	case x > 88 || x < -87:
		// Near overflow and below the smallest normal float32, where 2ⁿ
		// cannot be assembled in one step: leave them to math.Exp.
		return float32(math.Exp(float64(x)))
	}
	const (
		log2e = 1.44269504088896341
		ln2hi = 0.693145751953125
		ln2lo = 1.42860682030941723212e-6
	)
	// n = round(x·log2e), by truncation after adding ±0.5 (math.Floor is a
	// function call on baseline amd64).
	z := x * log2e
	if z < 0 {
		z -= 0.5
	} else {
		z += 0.5
	}
	n := float32(int32(z))
	r := x - n*ln2hi - n*ln2lo
	p := 1 + r*(1+r*(0.5+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720))))))
	return p * math.Float32frombits(uint32(int32(n)+127)<<23)
}
