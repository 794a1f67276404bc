// Package jsonerr rewords encoding/json's errors for people who wrote the
// JSON: the field and the kind of value it wants ("hidden_size is a JSON
// string, want an integer"), the byte a syntax error is at, and no Go type
// names or "json: " prefix. The caller adds which file or request it was.
package jsonerr

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// Reword returns err, an error of json.Unmarshal or a json.Decoder, as a
// user reads it. A type error names the field by its dotted JSON path where
// encoding/json knows it ("vision_config.hidden_size"); one without a field
// (the top level, or an element of an array at the top level) says only
// what was found and what was wanted. Errors that are not encoding/json's
// are returned as they are, but for the prefix.
func Reword(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		return fmt.Errorf("malformed JSON at byte %d: %v", se.Offset, se)
	case errors.As(err, &te) && te.Field != "":
		return fmt.Errorf("%s is a JSON %s, want %s", te.Field, te.Value, Kind(te.Type))
	case errors.As(err, &te):
		return fmt.Errorf("a JSON %s, want %s", te.Value, Kind(te.Type))
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("the JSON ends early")
	}
	if msg, ok := strings.CutPrefix(err.Error(), "json: "); ok {
		return errors.New(msg)
	}
	return err
}

// Kind names the JSON values a Go type decodes from, with its article:
// "an integer", "a number", "a string", "a boolean", "an array", "an
// object"; a pointer decodes from what its element does, and an interface
// from any value.
func Kind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return Kind(t.Elem())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Interface:
		return "any JSON value"
	}
	panic(fmt.Sprintf("jsonerr.Kind: %v does not decode from JSON", t))
}
