// Package tfevents writes and reads TensorBoard event files: scalar
// summaries, one event per step, in the format TensorBoard and TensorFlow's
// summary readers load (a TFRecord file of tensorflow.Event protocol
// buffers, named events.out.tfevents.*).
//
// A TFRecord is
//
//	uint64 length (little-endian)
//	uint32 masked CRC-32C of the length's 8 bytes
//	[length]byte data
//	uint32 masked CRC-32C of the data
//
// where mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8. The first event of
// a file carries file_version "brain.Event:2". The fields written are
// Event{wall_time = 1 (double), step = 2 (int64), file_version = 3
// (string), summary = 5 (Summary), session_log = 6 (SessionLog)},
// Summary{value = 1 (repeated Value)}, Value{tag = 1 (string),
// simple_value = 2 (float)} and SessionLog{status = 1 (enum; START = 1)}.
// The protocol buffers are encoded by hand: the package needs no
// dependency.
package tfevents

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// FileVersion is the file_version of an event file's first event.
const FileVersion = "brain.Event:2"

// Event is one event: the scalars of one step, the file's version record,
// or a session start (Start), which tells TensorBoard to drop what an
// earlier run recorded at this step and after (a resumed run).
type Event struct {
	Wall    float64            // seconds since the Unix epoch
	Step    int64              // the training step
	Version string             // file_version, in a file's first event
	Start   bool               // a SessionLog START event
	Scalars map[string]float32 // tag → simple_value
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC is TFRecord's masked CRC-32C of b.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return ((c >> 15) | (c << 17)) + 0xa282ead8
}

// Writer appends events to an event file. It is not safe for concurrent
// use.
type Writer struct {
	f    *os.File
	bw   *bufio.Writer
	path string
}

// Create starts a new event file in dir, named as TensorBoard expects
// (events.out.tfevents.<seconds>.<host>.<pid>.<n>, n counting files made in
// the same second), holding the version event. When firstStep > 0 a
// session start at firstStep follows: TensorBoard then drops what earlier
// files recorded at firstStep and after, so that a resumed run shows each
// step once.
func Create(dir string, firstStep int64) (*Writer, error) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	now := time.Now()
	var f *os.File
	var path string
	for n := 0; ; n++ {
		path = filepath.Join(dir, fmt.Sprintf("events.out.tfevents.%d.%s.%d.%d", now.Unix(), host, os.Getpid(), n))
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("tfevents: %w", err)
	}
	w := &Writer{f: f, bw: bufio.NewWriter(f), path: path}
	wall := float64(now.UnixNano()) / 1e9
	err = w.Write(Event{Wall: wall, Version: FileVersion})
	if err == nil && firstStep > 0 {
		err = w.Write(Event{Wall: wall, Step: firstStep, Start: true})
	}
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return w, nil
}

// Path returns the event file's path.
func (w *Writer) Path() string { return w.path }

// Scalars writes one event of the scalars of step, timed now.
func (w *Writer) Scalars(step int64, scalars map[string]float64) error {
	ev := Event{Wall: float64(time.Now().UnixNano()) / 1e9, Step: step, Scalars: map[string]float32{}}
	for k, v := range scalars {
		ev.Scalars[k] = float32(v)
	}
	return w.Write(ev)
}

// Write appends ev as one record (buffered; see Flush).
func (w *Writer) Write(ev Event) error {
	data := ev.marshal()
	var head [12]byte
	binary.LittleEndian.PutUint64(head[:8], uint64(len(data)))
	binary.LittleEndian.PutUint32(head[8:], maskedCRC(head[:8]))
	var tail [4]byte
	binary.LittleEndian.PutUint32(tail[:], maskedCRC(data))
	for _, b := range [][]byte{head[:], data, tail[:]} {
		if _, err := w.bw.Write(b); err != nil {
			return fmt.Errorf("tfevents: %s: %w", w.path, err)
		}
	}
	return nil
}

// Flush writes buffered events to the file.
func (w *Writer) Flush() error {
	if err := w.bw.Flush(); err != nil {
		return fmt.Errorf("tfevents: %s: %w", w.path, err)
	}
	return nil
}

// Close flushes and closes the file.
func (w *Writer) Close() error {
	err := w.Flush()
	if cerr := w.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("tfevents: %s: %w", w.path, cerr)
	}
	return err
}

// Protocol buffer wire types.
const (
	wireVarint = 0
	wire64     = 1
	wireBytes  = 2
	wire32     = 5
)

func appendTag(b []byte, field, wire int) []byte {
	return binary.AppendUvarint(b, uint64(field<<3|wire))
}

func appendBytes(b []byte, field int, v []byte) []byte {
	b = appendTag(b, field, wireBytes)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// marshal encodes ev as a tensorflow.Event; scalars in tag order.
func (ev Event) marshal() []byte {
	var b []byte
	b = appendTag(b, 1, wire64)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(ev.Wall))
	if ev.Step != 0 {
		b = appendTag(b, 2, wireVarint)
		b = binary.AppendUvarint(b, uint64(ev.Step))
	}
	switch {
	case ev.Version != "":
		b = appendBytes(b, 3, []byte(ev.Version))
	case ev.Start:
		b = appendBytes(b, 6, []byte{1<<3 | wireVarint, 1}) // SessionLog{status: START}
	default:
		tags := make([]string, 0, len(ev.Scalars))
		for k := range ev.Scalars {
			tags = append(tags, k)
		}
		slices.Sort(tags)
		var sum []byte
		for _, tag := range tags {
			var v []byte
			v = appendBytes(v, 1, []byte(tag))
			v = appendTag(v, 2, wire32)
			v = binary.LittleEndian.AppendUint32(v, math.Float32bits(ev.Scalars[tag]))
			sum = appendBytes(sum, 1, v)
		}
		b = appendBytes(b, 5, sum)
	}
	return b
}

// ErrCorrupt is what Read wraps when a record's length or CRC is wrong.
var ErrCorrupt = errors.New("corrupt record")

// Read reads every event of the event file at path, checking each
// record's CRCs. A record cut at the end of the file (a run killed while
// writing) ends the events without an error.
func Read(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tfevents: %w", err)
	}
	defer f.Close()
	br := bufio.NewReader(f)
	var evs []Event
	for n := 1; ; n++ {
		var head [12]byte
		if _, err := io.ReadFull(br, head[:]); err == io.EOF || err == io.ErrUnexpectedEOF {
			return evs, nil
		} else if err != nil {
			return nil, fmt.Errorf("tfevents: %s: %w", path, err)
		}
		if maskedCRC(head[:8]) != binary.LittleEndian.Uint32(head[8:]) {
			return nil, fmt.Errorf("tfevents: %s: record %d: %w (length CRC)", path, n, ErrCorrupt)
		}
		size := binary.LittleEndian.Uint64(head[:8])
		if size > 1<<26 {
			return nil, fmt.Errorf("tfevents: %s: record %d: %w (length %d)", path, n, ErrCorrupt, size)
		}
		data := make([]byte, size+4)
		if _, err := io.ReadFull(br, data); err == io.EOF || err == io.ErrUnexpectedEOF {
			return evs, nil
		} else if err != nil {
			return nil, fmt.Errorf("tfevents: %s: %w", path, err)
		}
		if maskedCRC(data[:size]) != binary.LittleEndian.Uint32(data[size:]) {
			return nil, fmt.Errorf("tfevents: %s: record %d: %w (data CRC)", path, n, ErrCorrupt)
		}
		ev, err := unmarshal(data[:size])
		if err != nil {
			return nil, fmt.Errorf("tfevents: %s: record %d: %w", path, n, err)
		}
		evs = append(evs, ev)
	}
}

// field is one protocol buffer field as read.
type field struct {
	num, wire int
	u         uint64 // varint, 64- or 32-bit value
	bytes     []byte // length-delimited value
}

// fields splits an encoded message into its fields.
func fields(b []byte) ([]field, error) {
	var fs []field
	for len(b) > 0 {
		key, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, errors.New("bad field key")
		}
		b = b[n:]
		f := field{num: int(key >> 3), wire: int(key & 7)}
		switch f.wire {
		case wireVarint:
			f.u, n = binary.Uvarint(b)
			if n <= 0 {
				return nil, errors.New("bad varint")
			}
			b = b[n:]
		case wire64:
			if len(b) < 8 {
				return nil, errors.New("cut 64-bit field")
			}
			f.u, b = binary.LittleEndian.Uint64(b), b[8:]
		case wire32:
			if len(b) < 4 {
				return nil, errors.New("cut 32-bit field")
			}
			f.u, b = uint64(binary.LittleEndian.Uint32(b)), b[4:]
		case wireBytes:
			l, n := binary.Uvarint(b)
			if n <= 0 || uint64(len(b)-n) < l {
				return nil, errors.New("cut length-delimited field")
			}
			f.bytes, b = b[n:n+int(l)], b[n+int(l):]
		default:
			return nil, fmt.Errorf("wire type %d not supported", f.wire)
		}
		fs = append(fs, f)
	}
	return fs, nil
}

// unmarshal decodes the fields of a tensorflow.Event that Event holds;
// others are skipped.
func unmarshal(b []byte) (Event, error) {
	fs, err := fields(b)
	if err != nil {
		return Event{}, err
	}
	var ev Event
	for _, f := range fs {
		switch f.num {
		case 1:
			ev.Wall = math.Float64frombits(f.u)
		case 2:
			ev.Step = int64(f.u)
		case 3:
			ev.Version = string(f.bytes)
		case 6:
			sl, err := fields(f.bytes)
			if err != nil {
				return Event{}, fmt.Errorf("session_log: %w", err)
			}
			for _, s := range sl {
				ev.Start = ev.Start || (s.num == 1 && s.u == 1)
			}
		case 5:
			vals, err := fields(f.bytes)
			if err != nil {
				return Event{}, fmt.Errorf("summary: %w", err)
			}
			ev.Scalars = map[string]float32{}
			for _, v := range vals {
				if v.num != 1 {
					continue
				}
				vf, err := fields(v.bytes)
				if err != nil {
					return Event{}, fmt.Errorf("summary value: %w", err)
				}
				var tag string
				var val float32
				for _, x := range vf {
					switch {
					case x.num == 1 && x.wire == wireBytes:
						tag = string(x.bytes)
					case x.num == 2 && x.wire == wire32:
						val = math.Float32frombits(uint32(x.u))
					}
				}
				ev.Scalars[tag] = val
			}
		}
	}
	return ev, nil
}

// Point is one value of a scalar series.
type Point struct {
	Step  int64
	Value float32
}

// ReadDir reads the event files in dir in name order (which is time
// order), as TensorBoard loads a run: a session start drops what earlier
// events recorded at its step and after. It returns each tag's points in
// the order they stand.
func ReadDir(dir string) (map[string][]Point, error) {
	names, err := filepath.Glob(filepath.Join(dir, "events.out.tfevents.*"))
	if err != nil {
		return nil, fmt.Errorf("tfevents: %w", err)
	}
	slices.Sort(names)
	series := map[string][]Point{}
	for _, name := range names {
		evs, err := Read(name)
		if err != nil {
			return nil, err
		}
		for _, ev := range evs {
			if ev.Start {
				for tag, ps := range series {
					series[tag] = slices.DeleteFunc(ps, func(p Point) bool { return p.Step >= ev.Step })
				}
			}
			for tag, v := range ev.Scalars {
				series[tag] = append(series[tag], Point{ev.Step, v})
			}
		}
	}
	return series, nil
}
