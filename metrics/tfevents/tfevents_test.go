package tfevents

import (
	"bytes"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
)

// TestCRC checks CRC-32C against its standard check value and the mask
// against the formula.
func TestCRC(t *testing.T) {
	if c := crc32.Checksum([]byte("123456789"), castagnoli); c != 0xe3069283 {
		t.Fatalf("CRC-32C of 123456789 = %#x, want 0xe3069283", c)
	}
	c := uint32(0xe3069283)
	if got, want := maskedCRC([]byte("123456789")), ((c>>15)|(c<<17))+0xa282ead8; got != want {
		t.Fatalf("masked CRC %#x, want %#x", got, want)
	}
}

// TestMarshal compares an event's encoding with bytes worked out by hand
// from the protocol buffer definitions.
func TestMarshal(t *testing.T) {
	tests := []struct {
		name string
		ev   Event
		want []byte
	}{
		{"scalar", Event{Wall: 1.5, Step: 3, Scalars: map[string]float32{"loss": 2}}, []byte{
			0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, // wall_time 1.5
			0x10, 0x03, // step 3
			0x2a, 0x0d, // summary, 13 bytes
			0x0a, 0x0b, // value, 11 bytes
			0x0a, 0x04, 'l', 'o', 's', 's', // tag
			0x15, 0, 0, 0, 0x40, // simple_value 2
		}},
		{"version", Event{Wall: 0, Version: "brain.Event:2"}, append([]byte{
			0x09, 0, 0, 0, 0, 0, 0, 0, 0, 0x1a, 13}, "brain.Event:2"...)},
		{"session start", Event{Wall: 0, Step: 200, Start: true}, []byte{
			0x09, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0xc8, 0x01, 0x32, 0x02, 0x08, 0x01}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.ev.marshal(); !bytes.Equal(got, tc.want) {
				t.Errorf("marshal = % x\nwant      % x", got, tc.want)
			}
		})
	}
}

// TestRoundTrip writes a run's events, resumed once, and reads them back.
func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	for step := int64(1); step <= 3; step++ {
		if err := w.Scalars(step, map[string]float64{"loss": 1 / float64(step), "lr": 1e-4}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	evs, err := Read(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 4 || evs[0].Version != FileVersion {
		t.Fatalf("read %d events (first %+v), want the version event and 3 steps", len(evs), evs[0])
	}
	for i, ev := range evs[1:] {
		if ev.Step != int64(i+1) || ev.Scalars["loss"] != float32(1/float64(i+1)) || ev.Scalars["lr"] != float32(1e-4) {
			t.Errorf("event %d: %+v", i+1, ev)
		}
	}

	// A cut last record ends the events; a damaged one is an error.
	raw, err := os.ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "cut")
	os.WriteFile(cut, raw[:len(raw)-3], 0o644)
	if evs, err := Read(cut); err != nil || len(evs) != 3 {
		t.Errorf("a cut file: %d events, %v; want 3 and no error", len(evs), err)
	}
	bad := bytes.Clone(raw)
	bad[len(bad)-6] ^= 1
	os.WriteFile(cut, bad, 0o644)
	if _, err := Read(cut); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a damaged record: %v, want ErrCorrupt", err)
	}

	// A resumed run's file starts with a session start at its step.
	w2, err := Create(t.TempDir(), 2)
	if err != nil {
		t.Fatal(err)
	}
	w2.Close()
	evs, err = Read(w2.Path())
	if err != nil || len(evs) != 2 || !evs[1].Start || evs[1].Step != 2 {
		t.Errorf("a resumed file: %+v, %v; want the version and a session start at step 2", evs, err)
	}
}
