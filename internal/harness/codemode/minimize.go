// The minimizer that keeps a tool's result to the fields its output schema declares.

package codemode

// Minimize returns result (as encoding/json decodes into an any) keeping only what the
// output schema of the tool with the model-facing name declares: an object whose
// schema lists properties and does not allow others (additionalProperties false or
// absent) loses the undeclared ones, recursively through objects, arrays and
// additionalProperties. Values that do not have the schema's shape, unions that do not
// settle on one arm, and tools without an output schema pass through. result is not
// modified.
func (a *API) Minimize(name string, result any) any {
	f := a.byName[name]
	if f == nil || f.output == nil {
		return result
	}
	return minimize(f.output, result)
}

func minimize(t *schemaType, v any) any {
	switch t.kind {
	case objectKind:
		m, ok := v.(map[string]any)
		if !ok || t.props == nil && t.elem == nil {
			return v
		}
		out := make(map[string]any, len(m))
		for k, x := range m {
			switch p := t.prop(k); {
			case p != nil:
				out[k] = minimize(p.typ, x)
			case t.closed:
			case t.elem != nil:
				out[k] = minimize(t.elem, x)
			default:
				out[k] = x
			}
		}
		return out
	case arrayKind:
		s, ok := v.([]any)
		if !ok {
			return v
		}
		out := make([]any, len(s))
		for i, x := range s {
			out[i] = minimize(t.elem, x)
		}
		return out
	case unionKind:
		var arm *schemaType
		for _, a := range t.alts {
			if a.kind == anyKind || a.accepts(v) {
				if arm != nil {
					return v
				}
				arm = a
			}
		}
		if arm != nil {
			return minimize(arm, v)
		}
	}
	return v
}

// accepts reports whether v has the JSON shape of t, for choosing a union's arm.
func (t *schemaType) accepts(v any) bool {
	switch v.(type) {
	case map[string]any:
		return t.kind == objectKind
	case []any:
		return t.kind == arrayKind
	}
	return t.kind != objectKind && t.kind != arrayKind
}
