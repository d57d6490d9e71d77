"""The JSON-schema corpus of the structured-output tests (test_structured_output.py).

SCHEMAS: name -> {"schema", "valid", "invalid"}.
  schema   every schema is "finite-friendly": strings carry a maxLength, arrays a maxItems, and
           recursion has a way out, so that the tiny random-weight fixture model sampling at
           temperature 1 ends its answer within a few hundred tokens. The exceptions, where the
           keyword itself leaves the length open (formats, an unanchored pattern, a dictionary's
           keys), are listed in OPEN_ENDED.
  valid    documents that satisfy the schema, written in the form the compiled grammar must
           accept: properties in schema order, no properties the schema does not name. The tests
           serialise them compactly (json.dumps separators (",", ":")) and with single spaces.
  invalid  JSON documents that violate the schema; the compiled grammar must reject every one
           (its language is a subset of the schema's).
  beyond   (optional) documents that satisfy the schema but lie outside the subset the grammar
           is documented to keep (docs/openai-api.md §15.2: bounded numbers only as integers and
           decimals whose unit interval is in range, February to the 28th, ipv6 in the full
           eight-group form): the grammar may accept or refuse them, but megadecode and
           llguidance must agree.
  compact_only  (optional) the valid documents are checked in their compact form only.

UNSUPPORTED: (name, schema, keyword) — schemas the server must refuse with HTTP 400 whose
message names the keyword.

Draft 2020-12 throughout; every schema is checked against the metaschema by the tests.
"""

SCHEMAS = {
    # ---- objects -----------------------------------------------------------------------------
    "flat_object": {
        "schema": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "maxLength": 12},
                "age": {"type": "integer", "minimum": 0, "maximum": 120},
            },
            "required": ["name", "age"],
            "additionalProperties": False,
        },
        "valid": [{"name": "Ada", "age": 36}, {"name": "", "age": 0}, {"name": "héllo wörld", "age": 120}],
        "invalid": [{"name": "Ada"}, {"name": "Ada", "age": 121}, {"name": "Ada", "age": -1},
                    {"name": "abcdefghijklm", "age": 1}, {"name": 3, "age": 3}, {"age": 3, "name": "x", "z": 1}],
    },
    "nested_object": {
        "schema": {
            "type": "object",
            "properties": {
                "person": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "maxLength": 10},
                        "address": {
                            "type": "object",
                            "properties": {
                                "street": {"type": "string", "maxLength": 16},
                                "city": {"type": "string", "maxLength": 10},
                                "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
                            },
                            "required": ["street", "city", "zip"],
                            "additionalProperties": False,
                        },
                    },
                    "required": ["name", "address"],
                    "additionalProperties": False,
                },
                "active": {"type": "boolean"},
            },
            "required": ["person", "active"],
            "additionalProperties": False,
        },
        "valid": [{"person": {"name": "Bo", "address": {"street": "1 Main St", "city": "Paris", "zip": "75001"}},
                   "active": True}],
        "invalid": [{"person": {"name": "Bo", "address": {"street": "x", "city": "y", "zip": "7500"}}, "active": True},
                    {"person": {"name": "Bo", "address": {"street": "x", "city": "y", "zip": "75001"}}, "active": 1},
                    {"person": {"name": "Bo"}, "active": False}],
    },
    "optional_properties": {
        "schema": {
            "type": "object",
            "properties": {
                "id": {"type": "integer", "minimum": 1, "maximum": 9999},
                "nickname": {"type": "string", "maxLength": 8},
                "score": {"type": "number", "minimum": 0, "maximum": 10},
                "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 2},
            },
            "required": ["id"],
            "additionalProperties": False,
        },
        "valid": [{"id": 1}, {"id": 42, "score": 9.5}, {"id": 7, "nickname": "bob", "tags": []},
                  {"id": 9999, "nickname": "x", "score": 0, "tags": ["a", "bc"]}],
        "invalid": [{}, {"nickname": "bob"}, {"id": 0}, {"id": 1, "score": 10.5},
                    {"id": 1, "tags": ["a", "b", "c"]}, {"id": 1, "other": 1}],
    },
    "all_optional_no_additional": {
        "schema": {
            "type": "object",
            "properties": {
                "a": {"type": "boolean"},
                "b": {"type": "null"},
                "c": {"type": "integer", "minimum": -5, "maximum": 5},
            },
            "additionalProperties": False,
        },
        "valid": [{}, {"a": True}, {"b": None}, {"c": -5}, {"a": False, "c": 5}, {"a": True, "b": None, "c": 0}],
        "invalid": [{"d": 1}, {"a": 1}, {"c": 6}, {"b": False}],
    },
    "empty_object": {
        "schema": {"type": "object", "properties": {}, "additionalProperties": False},
        "valid": [{}],
        "invalid": [{"a": 1}, [], None],
    },
    # ---- arrays ------------------------------------------------------------------------------
    "int_array_bounds": {
        "schema": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 99},
                   "minItems": 1, "maxItems": 4},
        "valid": [[0], [1, 2, 3, 99], [50, 50]],
        "invalid": [[], [1, 2, 3, 4, 5], [100], [-1], ["1"]],
    },
    "array_of_objects": {
        "schema": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"sku": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{3}$"},
                               "qty": {"type": "integer", "minimum": 1, "maximum": 50}},
                "required": ["sku", "qty"],
                "additionalProperties": False,
            },
            "minItems": 1,
            "maxItems": 3,
        },
        "valid": [[{"sku": "AB123", "qty": 1}], [{"sku": "ZZ000", "qty": 50}, {"sku": "QQ999", "qty": 7}]],
        "invalid": [[], [{"sku": "AB12", "qty": 1}], [{"sku": "AB123", "qty": 0}], [{"sku": "AB123"}]],
    },
    "exact_length_array": {
        "schema": {"type": "array", "items": {"type": "boolean"}, "minItems": 3, "maxItems": 3},
        "valid": [[True, False, True]],
        "invalid": [[True, False], [True, True, True, True], [1, 0, 1]],
    },
    "tuple_prefix_items": {
        "schema": {
            "type": "array",
            "prefixItems": [
                {"type": "string", "maxLength": 5},
                {"type": "integer", "minimum": -10, "maximum": 10},
                {"type": "boolean"},
            ],
            "items": False,
            "minItems": 3,
        },
        "valid": [["ab", -10, True], ["", 0, False]],
        "invalid": [["ab", 1], ["ab", 1, True, 2], [1, "ab", True], ["abcdef", 1, True], ["ab", 11, True]],
    },
    "prefix_items_then_items": {
        "schema": {
            "type": "array",
            "prefixItems": [{"type": "string", "enum": ["x", "y"]}],
            "items": {"type": "integer", "minimum": 0, "maximum": 9},
            "minItems": 1,
            "maxItems": 4,
        },
        "valid": [["x"], ["y", 0, 9, 5]],
        "invalid": [[], ["z"], ["x", 10], ["x", 1, 2, 3, 4], [1]],
    },
    "nested_arrays": {
        "schema": {"type": "array", "maxItems": 3,
                   "items": {"type": "array", "maxItems": 3, "items": {"type": "integer", "minimum": 0, "maximum": 9}}},
        "valid": [[], [[]], [[1, 2], [3], []]],
        "invalid": [[[10]], [[1, 2, 3, 4]], [1]],
    },
    # ---- enums and const ---------------------------------------------------------------------
    "string_enum": {
        "schema": {"type": "string", "enum": ["red", "green", "blue", "light green"]},
        "valid": ["red", "green", "light green"],
        "invalid": ["Red", "gree", "light", ""],
    },
    "number_enum": {
        "schema": {"enum": [1, 2.5, -3, 100, 0]},
        "valid": [1, 2.5, -3, 100, 0],
        "invalid": [2, -2.5, 10, "1"],
    },
    "mixed_enum": {
        "schema": {"enum": ["a", 1, True, None, 2.5, "null"]},
        "valid": ["a", 1, True, None, 2.5, "null"],
        "invalid": ["b", False, 0, "true"],
    },
    "const_fields": {
        "schema": {
            "type": "object",
            "properties": {
                "version": {"const": "v1"},
                "kind": {"const": 3},
                "flags": {"const": [True, None]},
                "value": {"type": "integer", "minimum": 0, "maximum": 9},
            },
            "required": ["version", "kind", "flags", "value"],
            "additionalProperties": False,
        },
        "valid": [{"version": "v1", "kind": 3, "flags": [True, None], "value": 4}],
        "compact_only": True,  # a const array may be written as its compact text only
        "invalid": [{"version": "v2", "kind": 3, "flags": [True, None], "value": 4},
                    {"version": "v1", "kind": 4, "flags": [True, None], "value": 4},
                    {"version": "v1", "kind": 3, "flags": [True], "value": 4}],
    },
    "enum_in_object": {
        "schema": {
            "type": "object",
            "properties": {
                "status": {"enum": ["open", "closed", "pending"]},
                "priority": {"type": "integer", "enum": [1, 2, 3]},
            },
            "required": ["status", "priority"],
            "additionalProperties": False,
        },
        "valid": [{"status": "open", "priority": 1}, {"status": "pending", "priority": 3}],
        "invalid": [{"status": "done", "priority": 1}, {"status": "open", "priority": 4}],
    },
    # ---- integers and numbers with bounds ----------------------------------------------------
    "integer_inclusive": {
        "schema": {"type": "integer", "minimum": -50, "maximum": 50},
        "valid": [-50, -1, 0, 7, 50],
        "invalid": [-51, 51, 100, 1.5],
    },
    "integer_exclusive": {
        "schema": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10},
        "valid": [1, 5, 9],
        "invalid": [0, 10, -1, 11],
    },
    "integer_negative_range": {
        "schema": {"type": "integer", "minimum": -1000, "maximum": -10},
        "valid": [-1000, -999, -100, -10],
        "invalid": [-9, 0, -1001, 10],
    },
    "integer_large_bounds": {
        "schema": {"type": "integer", "minimum": 1999, "maximum": 123456},
        "valid": [1999, 2000, 99999, 123456],
        "invalid": [1998, 123457, 0, 200000],
    },
    "integer_min_only": {
        "schema": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 17}},
                   "required": ["n"], "additionalProperties": False},
        "valid": [{"n": 17}, {"n": 18}, {"n": 100}, {"n": 1000000}],
        "invalid": [{"n": 16}, {"n": 0}, {"n": -17}],
    },
    "number_inclusive": {
        "schema": {"type": "number", "minimum": 0, "maximum": 1},
        "valid": [0, 0.5, 1, 0.123],
        "invalid": [-0.1, 1.01, 2],
        "beyond": [1.0, 1.00],
    },
    "number_exclusive": {
        "schema": {"type": "number", "exclusiveMinimum": -1.5, "exclusiveMaximum": 2.5},
        "valid": [-1, -0.5, 0, 1.99, 2],
        "invalid": [-1.5, 2.5, 3, -2],
        "beyond": [-1.4, 2.49],
    },
    "number_negative_range": {
        "schema": {"type": "number", "minimum": -100.5, "maximum": -0.5},
        "valid": [-100, -50.25, -1.5, -1],
        "invalid": [-0.4, 0, -100.6, 1],
        "beyond": [-100.5, -0.5, -0.75],
    },
    "number_unbounded_in_object": {
        "schema": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                   "required": ["x", "y"], "additionalProperties": False},
        "valid": [{"x": 0, "y": -1.5}, {"x": 1e-05, "y": 12345}],
        "invalid": [{"x": "0", "y": 1}, {"x": 1}],
    },
    # ---- strings -----------------------------------------------------------------------------
    "string_length_bounds": {
        "schema": {"type": "string", "minLength": 2, "maxLength": 6},
        "valid": ["ab", "abcdef", "héé"],
        "invalid": ["a", "", "abcdefg"],
    },
    "pattern_anchored": {
        "schema": {"type": "string", "pattern": "^[A-Z]{3}-\\d{2,4}$"},
        "valid": ["ABC-12", "XYZ-1234"],
        "invalid": ["AB-12", "ABC-1", "ABC-12345", "abc-12"],
    },
    "pattern_alternation": {
        "schema": {"type": "object",
                   "properties": {"code": {"type": "string", "pattern": "^(ok|err(or)?)_[0-9a-f]{2}$"}},
                   "required": ["code"], "additionalProperties": False},
        "valid": [{"code": "ok_0f"}, {"code": "err_a1"}, {"code": "error_ff"}],
        "invalid": [{"code": "ok_0g"}, {"code": "erro_00"}, {"code": "ok_000"}],
    },
    "pattern_unanchored": {
        # Unanchored: the string only has to contain a match somewhere (here: a digit; a rarer
        # match would keep the random model writing until max_tokens).
        "schema": {"type": "string", "pattern": "\\d"},
        "valid": ["1", "abc 9 def", "x7"],
        "invalid": ["", "x", "abc def"],
    },
    # ---- formats -----------------------------------------------------------------------------
    "format_date_time": {
        "schema": {"type": "string", "format": "date-time"},
        "valid": ["2024-02-28T13:45:00Z", "1999-12-31T23:59:59.123+05:30"],
        "beyond": ["2024-02-29T13:45:00Z"],
        "invalid": ["2024-02-30T13:45:00Z", "2024-01-01 13:45:00Z", "2024-01-01T24:00:00Z", "2024-01-01T13:45:00"],
    },
    "format_date": {
        "schema": {"type": "object", "properties": {"day": {"type": "string", "format": "date"}},
                   "required": ["day"], "additionalProperties": False},
        "valid": [{"day": "2023-01-31"}, {"day": "2023-04-30"}],
        "beyond": [{"day": "2000-02-29"}],
        "invalid": [{"day": "2023-02-29"}, {"day": "2023-13-01"}, {"day": "2023-04-31"}, {"day": "23-01-01"}],
    },
    "format_time": {
        "schema": {"type": "string", "format": "time"},
        "valid": ["00:00:00Z", "23:59:59.5-08:00"],
        "invalid": ["24:00:00Z", "12:60:00Z", "12:00"],
    },
    "format_duration": {
        "schema": {"type": "string", "format": "duration"},
        "valid": ["P1D", "PT5M", "P1Y2M3DT4H5M6S", "P2W"],
        "invalid": ["P", "PT", "1D", "P1DT"],
    },
    "format_email": {
        "schema": {"type": "string", "format": "email"},
        "valid": ["a@b.co", "first.last@example.com"],
        "invalid": ["plainaddress", ""],
    },
    "format_hostname": {
        "schema": {"type": "string", "format": "hostname"},
        "valid": ["localhost", "example.com", "a-b.c-d.org"],
        "invalid": ["-bad.com", "bad-.com", "a..b", ""],
    },
    "format_ipv4": {
        "schema": {"type": "string", "format": "ipv4"},
        "valid": ["0.0.0.0", "192.168.1.254", "255.255.255.255"],
        "invalid": ["256.1.1.1", "1.2.3", "01.2.3.4", "1.2.3.4.5"],
    },
    "format_ipv6": {
        "schema": {"type": "string", "format": "ipv6"},
        "valid": ["fe80:0:0:0:0:0:0:1", "2001:0db8:85a3:0000:0000:8a2e:0370:7334"],
        "beyond": ["::1", "2001:db8::ff00:42:8329", "::"],
        "invalid": ["1:2:3:4:5:6:7:8:9", "2001:db8:::1", "12345::", "g::1"],
    },
    "format_uuid": {
        "schema": {"type": "object", "properties": {"id": {"type": "string", "format": "uuid"}},
                   "required": ["id"], "additionalProperties": False},
        "valid": [{"id": "123e4567-e89b-12d3-a456-426614174000"}],
        "invalid": [{"id": "123e4567e89b12d3a456426614174000"}, {"id": "123e4567-e89b-12d3-a456-42661417400"},
                    {"id": "g23e4567-e89b-12d3-a456-426614174000"}],
    },
    # ---- anyOf, type arrays, nullable --------------------------------------------------------
    "any_of_scalars": {
        "schema": {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 9},
                             {"type": "string", "maxLength": 4}]},
        "valid": [0, 9, "", "abcd"],
        "invalid": [10, "abcde", True, None],
    },
    "any_of_nullable": {
        "schema": {"type": "object",
                   "properties": {"note": {"anyOf": [{"type": "string", "maxLength": 6}, {"type": "null"}]},
                                  "count": {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 3},
                                                      {"type": "null"}]}},
                   "required": ["note", "count"], "additionalProperties": False},
        "valid": [{"note": None, "count": None}, {"note": "hi", "count": 3}],
        "invalid": [{"note": "toolong!", "count": 1}, {"note": None, "count": 4}, {"note": None}],
    },
    "any_of_objects": {
        "schema": {"anyOf": [
            {"type": "object", "properties": {"circle": {"type": "integer", "minimum": 1, "maximum": 9}},
             "required": ["circle"], "additionalProperties": False},
            {"type": "object", "properties": {"w": {"type": "integer", "minimum": 1, "maximum": 9},
                                              "h": {"type": "integer", "minimum": 1, "maximum": 9}},
             "required": ["w", "h"], "additionalProperties": False},
        ]},
        "valid": [{"circle": 3}, {"w": 1, "h": 9}],
        "invalid": [{"circle": 0}, {"w": 1}, {}],
    },
    "type_array": {
        "schema": {"type": "object",
                   "properties": {"v": {"type": ["integer", "boolean", "null"]},
                                  "s": {"type": ["string", "null"], "maxLength": 3}},
                   "required": ["v", "s"], "additionalProperties": False},
        "valid": [{"v": 5, "s": None}, {"v": False, "s": "abc"}, {"v": None, "s": ""}],
        "invalid": [{"v": "5", "s": None}, {"v": 1.5, "s": None}, {"v": 1, "s": "abcd"}],
    },
    # ---- $defs / $ref / recursion ------------------------------------------------------------
    "defs_ref": {
        "schema": {
            "$defs": {
                "point": {"type": "object",
                          "properties": {"x": {"type": "integer", "minimum": -9, "maximum": 9},
                                         "y": {"type": "integer", "minimum": -9, "maximum": 9}},
                          "required": ["x", "y"], "additionalProperties": False},
            },
            "type": "object",
            "properties": {"from": {"$ref": "#/$defs/point"}, "to": {"$ref": "#/$defs/point"}},
            "required": ["from", "to"],
            "additionalProperties": False,
        },
        "valid": [{"from": {"x": 0, "y": -9}, "to": {"x": 9, "y": 1}}],
        "invalid": [{"from": {"x": 0, "y": 10}, "to": {"x": 0, "y": 0}}, {"from": {"x": 0}, "to": {"x": 0, "y": 0}}],
    },
    "definitions_ref": {
        "schema": {
            "definitions": {"color": {"type": "string", "enum": ["red", "green"]}},
            "type": "array",
            "items": {"$ref": "#/definitions/color"},
            "maxItems": 3,
        },
        "valid": [[], ["red"], ["green", "red", "red"]],
        "invalid": [["blue"], ["red", "red", "red", "red"]],
    },
    "recursive_tree": {
        "schema": {
            "$defs": {
                "node": {
                    "type": "object",
                    "properties": {
                        "value": {"type": "integer", "minimum": 0, "maximum": 99},
                        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2},
                    },
                    "required": ["value"],
                    "additionalProperties": False,
                },
            },
            "$ref": "#/$defs/node",
        },
        "valid": [{"value": 1}, {"value": 1, "children": []},
                  {"value": 1, "children": [{"value": 2, "children": [{"value": 3}]}, {"value": 4}]}],
        "invalid": [{"value": 1, "children": [{"value": 100}]}, {"children": []},
                    {"value": 1, "children": [{"value": 2}, {"value": 3}, {"value": 4}]}],
    },
    "recursive_linked_list": {
        "schema": {
            "type": "object",
            "properties": {
                "item": {"type": "string", "maxLength": 4},
                "next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]},
            },
            "required": ["item", "next"],
            "additionalProperties": False,
        },
        "valid": [{"item": "a", "next": None}, {"item": "a", "next": {"item": "b", "next": None}}],
        "invalid": [{"item": "a"}, {"item": "a", "next": {"item": "b"}}, {"item": "abcde", "next": None}],
    },
    # ---- dictionaries ------------------------------------------------------------------------
    "dictionary": {
        "schema": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 9}},
        "valid": [{}, {"a": 1}, {"x": 0, "y": 9, "longer key": 5}],
        "invalid": [{"a": 10}, {"a": "1"}, {"a": None}],
    },
    "dictionary_of_objects": {
        "schema": {"type": "object",
                   "additionalProperties": {"type": "object",
                                            "properties": {"ok": {"type": "boolean"}},
                                            "required": ["ok"], "additionalProperties": False}},
        "valid": [{}, {"k": {"ok": True}}],
        "invalid": [{"k": {}}, {"k": {"ok": 1}}],
    },
    # ---- a realistic mix ---------------------------------------------------------------------
    "event_record": {
        "schema": {
            "type": "object",
            "properties": {
                "id": {"type": "string", "format": "uuid"},
                "kind": {"enum": ["click", "view"]},
                "at": {"type": "string", "format": "date-time"},
                "user": {"type": "object",
                         "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 8},
                                        "age": {"type": ["integer", "null"], "minimum": 13, "maximum": 99}},
                         "required": ["name"], "additionalProperties": False},
                "scores": {"type": "array", "items": {"type": "number", "minimum": 0, "maximum": 1}, "maxItems": 3},
            },
            "required": ["id", "kind", "at", "user"],
            "additionalProperties": False,
        },
        "valid": [{"id": "00000000-0000-0000-0000-000000000000", "kind": "view", "at": "2020-01-01T00:00:00Z",
                   "user": {"name": "ann"}},
                  {"id": "123e4567-e89b-12d3-a456-426614174000", "kind": "click", "at": "2020-06-30T12:00:00+01:00",
                   "user": {"name": "bo", "age": None}, "scores": [0, 0.5, 1]}],
        "invalid": [{"id": "x", "kind": "view", "at": "2020-01-01T00:00:00Z", "user": {"name": "ann"}},
                    {"id": "00000000-0000-0000-0000-000000000000", "kind": "view", "at": "2020-01-01T00:00:00Z",
                     "user": {"name": ""}},
                    {"id": "00000000-0000-0000-0000-000000000000", "kind": "view", "at": "2020-01-01T00:00:00Z",
                     "user": {"name": "ann", "age": 12}}],
    },
}

# Schemas whose length the keywords leave open: an unanchored pattern, formats without a length
# bound, dictionary keys, unbounded numbers, recursion. Random sampling may run into max_tokens on
# these (uniform sampling over the allowed tokens finishes about 95% of them within 400 tokens).
OPEN_ENDED = {"pattern_unanchored", "format_email", "format_hostname", "format_duration",
              "dictionary", "dictionary_of_objects", "number_unbounded_in_object", "integer_min_only",
              "recursive_tree", "recursive_linked_list"}

# (name, schema, keyword the 400 message must name)
UNSUPPORTED = [
    ("allOf", {"allOf": [{"type": "string"}, {"maxLength": 3}]}, "allOf"),
    ("not", {"type": "object", "properties": {"a": {"not": {"type": "null"}}}, "required": ["a"]}, "not"),
    ("if_then_else", {"type": "object", "properties": {"a": {"type": "integer"}},
                      "if": {"properties": {"a": {"const": 1}}}, "then": {"required": ["a"]},
                      "else": {"required": []}}, "if"),
    ("oneOf", {"oneOf": [{"type": "integer"}, {"type": "string"}]}, "oneOf"),
    ("patternProperties", {"type": "object", "patternProperties": {"^x": {"type": "integer"}}},
     "patternProperties"),
    ("uniqueItems", {"type": "array", "items": {"type": "integer"}, "uniqueItems": True, "maxItems": 3},
     "uniqueItems"),
    ("multipleOf", {"type": "integer", "multipleOf": 3}, "multipleOf"),
    ("minProperties", {"type": "object", "additionalProperties": {"type": "integer"}, "minProperties": 1},
     "minProperties"),
    ("maxProperties", {"type": "object", "additionalProperties": {"type": "integer"}, "maxProperties": 2},
     "maxProperties"),
    ("contains", {"type": "array", "items": {"type": "integer"}, "contains": {"const": 1}}, "contains"),
    ("dependentRequired", {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                           "dependentRequired": {"a": ["b"]}}, "dependentRequired"),
    ("nested_unsupported", {"type": "object",
                            "properties": {"inner": {"type": "array", "items": {"allOf": [{"type": "integer"}]}}},
                            "required": ["inner"]}, "allOf"),
]
