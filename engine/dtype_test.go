package engine

import (
	"math"
	"testing"
)

func TestF32ToBF16(t *testing.T) {
	cases := []struct {
		name string
		in   uint32 // float32 bits
		want uint16
	}{
		{"one", 0x3f800000, 0x3f80},
		{"exact", 0x40490000, 0x4049},
		{"below half rounds down", 0x3f807fff, 0x3f80},
		{"tie to even stays", 0x3f808000, 0x3f80},
		{"tie to even rounds up", 0x3f818000, 0x3f82},
		{"above half rounds up", 0x3f808001, 0x3f81},
		{"negative tie", 0xbf818000, 0xbf82},
		{"rounds into infinity", 0x7f7fffff, 0x7f80},
		{"infinity", 0x7f800000, 0x7f80},
		{"negative zero", 0x80000000, 0x8000},
		{"subnormal", 0x00012345, 0x0001},
		{"quiet NaN", 0x7fc00000, 0x7fc0},
		{"signalling NaN stays NaN", 0x7f800001, 0x7fc0},
		{"NaN with payload in low bits only", 0xff800001, 0xffc0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := F32ToBF16(math.Float32frombits(c.in))
			if got != c.want {
				t.Errorf("F32ToBF16(%#08x) = %#04x, want %#04x", c.in, got, c.want)
			}
		})
	}
}

// TestBF16RoundTrip checks every bf16 value widens and narrows back to itself
// (NaNs to a NaN).
func TestBF16RoundTrip(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := BF16ToF32(uint16(h))
		back := F32ToBF16(f)
		if f != f {
			if b := BF16ToF32(back); b == b {
				t.Fatalf("NaN %#04x came back as %#04x", h, back)
			}
			continue
		}
		if back != uint16(h) {
			t.Fatalf("%#04x → %g → %#04x", h, f, back)
		}
	}
}

// TestBF16MatchesNearest compares rounding with a float64 computation of the
// nearest bf16 on random values.
func TestBF16MatchesNearest(t *testing.T) {
	x := uint32(12345)
	for i := 0; i < 200000; i++ {
		x = x*1664525 + 1013904223
		f := math.Float32frombits(x &^ 0x40000000) // keep exponents away from overflow
		if f != f {
			continue
		}
		lo := math.Float32frombits(math.Float32bits(f) &^ 0xffff)
		hi := math.Float32frombits(math.Float32bits(lo) + 0x10000)
		dlo := math.Abs(float64(f) - float64(lo))
		dhi := math.Abs(float64(hi) - float64(f))
		want := lo
		if dhi < dlo || (dhi == dlo && (math.Float32bits(lo)>>16)&1 == 1) {
			want = hi
		}
		if got := RoundBF16(f); got != want {
			t.Fatalf("RoundBF16(%g) = %g, want %g", f, got, want)
		}
	}
}

func TestF16(t *testing.T) {
	cases := []struct{ in, want float32 }{
		{1, 1}, {65504, 65504}, {65520, float32(math.Inf(1))}, {1.0009765625, 1.0009765625},
		{1.00048828125, 1}, // tie rounds to even
		{5.960464477539063e-08, 5.960464477539063e-08}, // smallest subnormal
	}
	for _, c := range cases {
		if got := RoundF16(c.in); got != c.want {
			t.Errorf("RoundF16(%g) = %g, want %g", c.in, got, c.want)
		}
	}
	if got := RoundF16(float32(math.NaN())); got == got {
		t.Errorf("RoundF16(NaN) = %g", got)
	}
}

func TestParseDType(t *testing.T) {
	for _, d := range []DType{F32, BF16, F16, I32} {
		got, err := ParseDType(d.String())
		if err != nil || got != d {
			t.Errorf("ParseDType(%q) = %v, %v", d.String(), got, err)
		}
	}
	if _, err := ParseDType("fp8"); err == nil {
		t.Error("ParseDType(fp8) succeeded")
	}
}
