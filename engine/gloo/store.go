package gloo

// The store Gloo's rendezvous reads and writes, exported to shim.cc: the
// Go side's engine.Store, named by a runtime/cgo handle. This file's
// preamble may only declare (cgo's rule for files with //export).

// #include <stdint.h>
// #include <stddef.h>
// #include <stdlib.h>
import "C"

import (
	"runtime/cgo"
	"strings"
	"time"
	"unsafe"

	"github.com/turnwise/turnwise/engine"
)

// glooStore is what a handle names: the store, the prefix of this
// communicator's keys, and the timeout of gets.
type glooStore struct {
	store   engine.Store
	prefix  string
	timeout time.Duration
}

func storeOf(h C.uintptr_t) *glooStore { return cgo.Handle(h).Value().(*glooStore) }

// putErr writes msg into the C buffer err of errlen bytes, NUL-terminated.
func putErr(err *C.char, errlen C.size_t, msg string) C.int {
	if errlen > 0 {
		b := unsafe.Slice((*byte)(unsafe.Pointer(err)), int(errlen))
		n := copy(b[:len(b)-1], msg)
		b[n] = 0
	}
	return -1
}

//export tw_gloo_store_set
func tw_gloo_store_set(h C.uintptr_t, key *C.char, keylen C.size_t, val *C.char, vallen C.size_t, err *C.char, errlen C.size_t) C.int {
	s := storeOf(h)
	if e := s.store.Set(s.prefix+C.GoStringN(key, C.int(keylen)), C.GoBytes(unsafe.Pointer(val), C.int(vallen))); e != nil {
		return putErr(err, errlen, e.Error())
	}
	return 0
}

//export tw_gloo_store_get
func tw_gloo_store_get(h C.uintptr_t, key *C.char, keylen C.size_t, val **C.char, vallen *C.size_t, err *C.char, errlen C.size_t) C.int {
	s := storeOf(h)
	v, e := s.store.Get(s.prefix+C.GoStringN(key, C.int(keylen)), s.timeout)
	if e != nil {
		return putErr(err, errlen, e.Error())
	}
	p := C.malloc(C.size_t(max(len(v), 1)))
	copy(unsafe.Slice((*byte)(p), len(v)), v)
	*val, *vallen = (*C.char)(p), C.size_t(len(v))
	return 0
}

//export tw_gloo_store_wait
func tw_gloo_store_wait(h C.uintptr_t, keys *C.char, keyslen C.size_t, timeoutMS C.int64_t, err *C.char, errlen C.size_t) C.int {
	s := storeOf(h)
	ks := strings.Split(C.GoStringN(keys, C.int(keyslen)), "\x00")
	for i := range ks {
		ks[i] = s.prefix + ks[i]
	}
	if e := s.store.Wait(ks, time.Duration(timeoutMS)*time.Millisecond); e != nil {
		return putErr(err, errlen, e.Error())
	}
	return 0
}
