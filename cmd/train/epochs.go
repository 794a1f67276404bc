package main

import (
	"fmt"
	"strconv"
)

// epochsValue is the value of train sft's --epochs: a number of passes over
// the training data, or unset ("", the default), when --steps says how long
// a run is. Unset reads as no number, so that the flag's range check
// (flagcheck: > 0) applies only to a value given.
type epochsValue struct{ n int }

// Set implements pflag.Value; "" unsets.
func (e *epochsValue) Set(s string) error {
	if s == "" {
		e.n = 0
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return fmt.Errorf("want a whole number of passes over the data, ≥ 1")
	}
	e.n = n
	return nil
}

// String implements pflag.Value: "" when unset.
func (e *epochsValue) String() string {
	if e.n == 0 {
		return ""
	}
	return strconv.Itoa(e.n)
}

// Type implements pflag.Value.
func (e *epochsValue) Type() string { return "int" }
