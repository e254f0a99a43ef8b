package workercmd

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
)

// jsonAttr makes a JSON log line readable without the code at hand:
// slog writes a duration as integer nanoseconds and an enum (an integer
// type with a String method) as its number. Durations become seconds
// (a float) and enums their names; the text format already does both.
func jsonAttr(_ []string, a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindDuration:
		return slog.Float64(a.Key, a.Value.Duration().Seconds())
	case slog.KindAny:
		if s, ok := enumName(a.Value.Any()); ok {
			return slog.String(a.Key, s)
		}
	}
	return a
}

// enumName is v's String when v is an integer-typed enum with no JSON
// form of its own.
func enumName(v any) (string, bool) {
	if _, ok := v.(json.Marshaler); ok {
		return "", false
	}
	s, ok := v.(fmt.Stringer)
	if !ok {
		return "", false
	}
	switch reflect.TypeOf(v).Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return s.String(), true
	}
	return "", false
}
