package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// DecodeExact decodes raw into v (a pointer) as strictly as DecodeFrame:
// every member name must match a field exactly (encoding/json alone matches
// case-insensitively), no member may be null unless its field holds raw
// JSON, each value must have the JSON kind of its field, and nothing may
// follow the value. Failures are a *Error with the given code and a JSON
// pointer to the offending member. Use it for payloads after PayloadFor.
func DecodeExact(raw []byte, v any, code Code) error {
	generic, err := decodeGeneric(raw)
	if err != nil {
		err.Code = code
		err.Retryable = code.Retryable()
		return err
	}
	return decodeExactParsed(raw, generic, v, code)
}

// DecodeExactParsed is DecodeExact for a caller that already holds parsed,
// the value Parse returned for raw.
func DecodeExactParsed(raw []byte, parsed, v any, code Code) error {
	return decodeExactParsed(raw, parsed, v, code)
}

func decodeGeneric(raw []byte) (any, *Error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, Errorf(CodeProtocolViolation, "malformed JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, Errorf(CodeProtocolViolation, "unexpected data after the JSON value")
	}
	return generic, nil
}

func decodeExactParsed(raw []byte, parsed, v any, code Code) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return Errorf(CodeInternalError, "decode target %T is not a non-nil pointer", v)
	}
	if err := checkValue(parsed, rv.Type().Elem()); err != nil {
		err.Code = code
		err.Retryable = code.Retryable()
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var pe *Error
		if errors.As(err, &pe) {
			// A nested value (such as Time) rejected its own form.
			return Errorf(code, "%s", pe.Message).At(pe.Pointer)
		}
		return Errorf(code, "%v", err)
	}
	return nil
}

var (
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
	timeType        = reflect.TypeFor[Time]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
)

// checkValue walks a generic JSON value (from Parse or a UseNumber decode)
// beside the Go type it will be decoded into. The error's pointer is built
// while unwinding, so success allocates nothing.
func checkValue(v any, t reflect.Type) *Error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessageType || t.Kind() == reflect.Interface {
		return nil
	}
	if v == nil {
		return Errorf(CodeProtocolViolation, "null is not allowed here")
	}
	if t == timeType {
		str, ok := v.(string)
		if !ok {
			return kindError("a string")
		}
		if _, err := ParseTime(str); err != nil {
			msg := err.Error()
			if pe := (*Error)(nil); errors.As(err, &pe) {
				msg = pe.Message
			}
			return Errorf(CodeProtocolViolation, "%s", msg)
		}
		return nil
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil // such types check their own form when decoded
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return kindError("an object")
		}
		matched := 0
		for _, f := range structFields(t) {
			val, present := obj[f.name]
			if !present {
				continue
			}
			matched++
			if err := checkValue(val, f.typ); err != nil {
				return under(pointerToken(f.name), err)
			}
		}
		if matched != len(obj) {
			known := make(map[string]bool)
			for _, f := range structFields(t) {
				known[f.name] = true
			}
			for _, k := range slices.Sorted(maps.Keys(obj)) {
				if !known[k] {
					return Errorf(CodeProtocolViolation, "unknown member %q", k).At("/" + pointerToken(k))
				}
			}
		}
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			return kindError("an object")
		}
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			if err := checkValue(obj[k], t.Elem()); err != nil {
				return under(pointerToken(k), err)
			}
		}
	case reflect.Slice, reflect.Array:
		arr, ok := v.([]any)
		if !ok {
			return kindError("an array")
		}
		for i, el := range arr {
			if err := checkValue(el, t.Elem()); err != nil {
				return under(strconv.Itoa(i), err)
			}
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			return kindError("a string")
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return kindError("a boolean")
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := v.(json.Number)
		if !ok || strings.ContainsAny(string(n), "-.eE") {
			return kindError("a non-negative integer")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok || strings.ContainsAny(string(n), ".eE") {
			return kindError("an integer")
		}
	case reflect.Float32, reflect.Float64:
		if _, ok := v.(json.Number); !ok {
			return kindError("a number")
		}
	}
	return nil
}

func kindError(want string) *Error {
	return Errorf(CodeProtocolViolation, "value is not %s", want)
}

// under prefixes err's pointer with one reference token.
func under(token string, err *Error) *Error {
	err.Pointer = "/" + token + err.Pointer
	return err
}

// pointerToken escapes one JSON pointer token (RFC 6901).
func pointerToken(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

type fieldInfo struct {
	name string
	typ  reflect.Type
}

var fieldCache sync.Map // reflect.Type -> []fieldInfo

// structFields lists the JSON members of t the way encoding/json names them,
// flattening untagged embedded structs.
func structFields(t reflect.Type) []fieldInfo {
	if cached, ok := fieldCache.Load(t); ok {
		return cached.([]fieldInfo)
	}
	var fields []fieldInfo
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				fields = append(fields, structFields(ft)...)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields = append(fields, fieldInfo{name: name, typ: f.Type})
	}
	fieldCache.Store(t, fields)
	return fields
}
