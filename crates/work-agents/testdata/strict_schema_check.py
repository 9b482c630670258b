# OpenAI's strict-mode check of an output schema, for the fake CLIs in tests: every object
# closed with every property required, every node typed, no keyword outside the subset.
BAD = ["minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
       "exclusiveMaximum", "multipleOf", "minItems", "maxItems", "uniqueItems", "oneOf", "allOf", "not"]
def strict_error(s, at="$"):
    if not isinstance(s, dict): return at + ": a schema must be an object"
    if "$ref" in s: return None
    for k in BAD:
        if k in s: return at + ": '" + k + "' is not permitted"
    t = s.get("type")
    types = t if isinstance(t, list) else ([t] if t else [])
    if len([x for x in types if x != "null"]) > 1: return at + ": a type list may hold one type besides null"
    if not types and "anyOf" not in s: return at + ": schema must have a 'type' key"
    if "object" in types or "properties" in s:
        if s.get("additionalProperties") is not False:
            return at + ": 'additionalProperties' is required to be supplied and to be false"
        props = s.get("properties")
        if not isinstance(props, dict): return at + ": an object must have 'properties'"
        if sorted(props) != sorted(s.get("required", [])):
            return at + ": 'required' is required to be supplied and to be an array including every key in properties"
        for k, v in props.items():
            e = strict_error(v, at + "." + k)
            if e: return e
    if "array" in types:
        if "items" not in s: return at + ": array schema missing items"
        e = strict_error(s["items"], at + "[]")
        if e: return e
    for i, b in enumerate(s.get("anyOf", [])):
        e = strict_error(b, at + "|" + str(i))
        if e: return e
    return None
def check_strict(s):
    if s.get("type") != "object": return "the root must be type: object"
    return strict_error(s)
