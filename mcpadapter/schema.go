package mcpadapter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fleetstate/fleetstate"
	"github.com/fleetstate/fleetstate/internal/mcpwire"
)

// field is one argument of a tool. The tool's input schema is generated
// from its fields, and decodeArgs enforces the same fields, so the schema a
// client sees and the checks the server makes cannot drift apart.
type field struct {
	name     string
	kind     string // JSON Schema type: string, boolean or number
	desc     string
	required bool
	min      *float64 // for numbers
}

func (f field) schema() map[string]any {
	s := map[string]any{"type": f.kind, "description": f.desc}
	if f.min != nil {
		s["minimum"] = *f.min
	}
	return s
}

func zero() *float64 { z := 0.0; return &z }

// inputSchema returns the JSON Schema of fields: an object with no other
// properties.
func inputSchema(fields []field) json.RawMessage {
	props := map[string]any{}
	required := []string{}
	for _, f := range fields {
		props[f.name] = f.schema()
		if f.required {
			required = append(required, f.name)
		}
	}
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return mustJSON(s)
}

// outputSchema returns a schema that admits the success object (props and
// required) and the error object {error, message}: clients validate
// structured content against the output schema even when isError is set.
func outputSchema(props map[string]any, required ...string) json.RawMessage {
	ok := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		ok["required"] = required
	}
	failure := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"error":   map[string]any{"type": "string", "description": "an error code such as ERR_FILE_EXISTS"},
			"message": map[string]any{"type": "string"},
		},
		"required": []string{"error", "message"},
	}
	return mustJSON(map[string]any{"type": "object", "anyOf": []any{ok, failure}})
}

func mustJSON(v any) json.RawMessage {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err) // the schemas are static values
	}
	return data
}

func (t tool) mcpTool() mcp.Tool {
	return mcp.Tool{
		Name:           t.name,
		Description:    t.description,
		RawInputSchema: inputSchema(t.input),
		RawOutputSchema: outputSchema(t.output["properties"].(map[string]any),
			t.output["required"].([]string)...),
		Annotations: t.annotations,
	}
}

// decodeArgs decodes the arguments of req strictly into dst, a pointer to a
// struct whose fields are pointers tagged with the argument names: unknown
// arguments, wrong types and missing required arguments are
// ERR_INVALID_ARGUMENT.
func decodeArgs(req mcp.CallToolRequest, fields []field, dst any) error {
	raw := req.Params.RawArguments
	if len(raw) == 0 && req.Params.Arguments != nil {
		var err error
		if raw, err = json.Marshal(req.Params.Arguments); err != nil {
			return invalid("arguments: %v", err)
		}
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		raw = []byte("{}")
	}
	if raw[0] != '{' {
		return invalid("arguments must be a JSON object")
	}
	// encoding/json matches names case-insensitively and reads null as a
	// missing argument; the schema admits neither, so check the names and
	// nulls exactly first. mcp-go has usually decoded the map already.
	args, ok := req.Params.Arguments.(map[string]any)
	if !ok {
		if err := json.Unmarshal(raw, &args); err != nil {
			return invalid("arguments: %s", strings.TrimPrefix(err.Error(), "json: "))
		}
	}
	// In order of name, so that the error names the same argument each
	// time.
	for _, name := range slices.Sorted(maps.Keys(args)) {
		i := slices.IndexFunc(fields, func(f field) bool { return f.name == name })
		switch {
		case i < 0:
			return invalid("unknown argument %q", name)
		case args[name] == nil:
			return invalid("argument %q must be a %s, not null", name, fields[i].kind)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return invalid("arguments: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	v := reflect.ValueOf(dst).Elem()
	for _, f := range fields {
		fv := fieldByTag(v, f.name)
		if !fv.IsValid() {
			panic("mcpadapter: argument " + f.name + " has no struct field")
		}
		if fv.IsNil() {
			if f.required {
				return invalid("missing required argument %q", f.name)
			}
			continue
		}
		if f.min != nil {
			if n, ok := fv.Elem().Interface().(float64); ok && n < *f.min {
				return invalid("argument %q must be at least %v", f.name, *f.min)
			}
		}
	}
	return nil
}

func fieldByTag(v reflect.Value, name string) reflect.Value {
	t := v.Type()
	for i := range t.NumField() {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if tag == name {
			return v.Field(i)
		}
	}
	return reflect.Value{}
}

func invalid(format string, args ...any) error {
	return &fleetstate.Error{Code: fleetstate.CodeInvalidArgument, Op: "arguments", Err: fmt.Errorf(format, args...)}
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// wireTool returns what the fast paths need to read a tool's arguments:
// fields, and the index of each, by its tag, in the struct newArgs points
// to.
func wireTool(fields []field, newArgs func() any) mcpwire.Tool {
	t := mcpwire.Tool{NewArgs: newArgs}
	v := reflect.ValueOf(newArgs()).Elem()
	out := make([]int, len(fields))
	for i, f := range fields {
		t.Fields = append(t.Fields, mcpwire.Field{Name: f.name, Kind: f.kind, Required: f.required, Min: f.min})
		out[i] = -1
		for j := range v.NumField() {
			if tag, _, _ := strings.Cut(v.Type().Field(j).Tag.Get("json"), ","); tag == f.name {
				out[i] = j
			}
		}
		if out[i] < 0 {
			panic("mcpadapter: argument " + f.name + " has no struct field")
		}
	}
	t.Index = out
	return t
}
