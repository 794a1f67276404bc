package gguf

import "fmt"

// lookup returns the value of key as a T, or an error naming the key and the
// file when the key is absent or holds another type.
func lookup[T any](f *File, key string) (T, error) {
	var zero T
	v, ok := f.Meta[key]
	if !ok {
		return zero, fmt.Errorf("gguf: %s: %q: %w", f.label(), key, ErrKeyNotFound)
	}
	t, ok := v.(T)
	if !ok {
		return zero, fmt.Errorf("gguf: %s: metadata key %q has type %s, want %s", f.label(), key, typeName(v), typeName(zero))
	}
	return t, nil
}

// String returns the string value of a metadata key.
func (f *File) String(key string) (string, error) { return lookup[string](f, key) }

// Uint32 returns the uint32 value of a metadata key.
func (f *File) Uint32(key string) (uint32, error) { return lookup[uint32](f, key) }

// Uint64 returns the uint64 value of a metadata key.
func (f *File) Uint64(key string) (uint64, error) { return lookup[uint64](f, key) }

// Float32 returns the float32 value of a metadata key.
func (f *File) Float32(key string) (float32, error) { return lookup[float32](f, key) }

// Bool returns the bool value of a metadata key.
func (f *File) Bool(key string) (bool, error) { return lookup[bool](f, key) }

// Strings returns the value of a metadata key holding an array of strings.
// The slice is the File's own: callers must not modify it.
func (f *File) Strings(key string) ([]string, error) { return lookup[[]string](f, key) }

// Float32s returns the value of a metadata key holding an array of float32.
// The slice is the File's own: callers must not modify it.
func (f *File) Float32s(key string) ([]float32, error) { return lookup[[]float32](f, key) }

// Int32s returns the value of a metadata key holding an array of int32.
// The slice is the File's own: callers must not modify it.
func (f *File) Int32s(key string) ([]int32, error) { return lookup[[]int32](f, key) }

// Int returns the value of a metadata key holding an integer of any of the
// eight integer types, converted to int64; a uint64 above the int64 range is
// an error. Writers disagree on which integer type to use for counts and
// token ids, and readers usually do not care.
func (f *File) Int(key string) (int64, error) {
	v, ok := f.Meta[key]
	if !ok {
		return 0, fmt.Errorf("gguf: %s: %q: %w", f.label(), key, ErrKeyNotFound)
	}
	switch x := v.(type) {
	case uint8:
		return int64(x), nil
	case int8:
		return int64(x), nil
	case uint16:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case int64:
		return x, nil
	case uint64:
		if x > 1<<63-1 {
			return 0, fmt.Errorf("gguf: %s: metadata key %q: value %d does not fit in int64", f.label(), key, x)
		}
		return int64(x), nil
	}
	return 0, fmt.Errorf("gguf: %s: metadata key %q has type %s, want an integer", f.label(), key, typeName(v))
}

// typeName names the GGUF type of a metadata value held as a Go value, such
// as "uint32" or "array of string".
func typeName(v any) string {
	t, elem, ok := valueTypeOf(v)
	switch {
	case !ok:
		return fmt.Sprintf("%T", v)
	case t == TypeArray && elem == TypeArray:
		return "array of arrays"
	case t == TypeArray:
		return "array of " + elem.String()
	}
	return t.String()
}

// valueTypeOf returns the GGUF type of a Go value (and the element type for
// arrays), or false for a Go type GGUF cannot hold.
func valueTypeOf(v any) (t, elem ValueType, ok bool) {
	switch v.(type) {
	case uint8:
		return TypeUint8, 0, true
	case int8:
		return TypeInt8, 0, true
	case uint16:
		return TypeUint16, 0, true
	case int16:
		return TypeInt16, 0, true
	case uint32:
		return TypeUint32, 0, true
	case int32:
		return TypeInt32, 0, true
	case float32:
		return TypeFloat32, 0, true
	case bool:
		return TypeBool, 0, true
	case string:
		return TypeString, 0, true
	case uint64:
		return TypeUint64, 0, true
	case int64:
		return TypeInt64, 0, true
	case float64:
		return TypeFloat64, 0, true
	case []uint8:
		return TypeArray, TypeUint8, true
	case []int8:
		return TypeArray, TypeInt8, true
	case []uint16:
		return TypeArray, TypeUint16, true
	case []int16:
		return TypeArray, TypeInt16, true
	case []uint32:
		return TypeArray, TypeUint32, true
	case []int32:
		return TypeArray, TypeInt32, true
	case []float32:
		return TypeArray, TypeFloat32, true
	case []bool:
		return TypeArray, TypeBool, true
	case []string:
		return TypeArray, TypeString, true
	case []uint64:
		return TypeArray, TypeUint64, true
	case []int64:
		return TypeArray, TypeInt64, true
	case []float64:
		return TypeArray, TypeFloat64, true
	case []any:
		return TypeArray, TypeArray, true
	}
	return 0, 0, false
}
