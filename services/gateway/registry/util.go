package registry

import (
	"reflect"
	"sort"
)

// newOf returns a new zero object of T's pointed-to type (T is a pointer type).
func newOf[T any](zero T) T {
	return reflect.New(reflect.TypeOf(zero).Elem()).Interface().(T)
}

func sortStrings(s []string) { sort.Strings(s) }
