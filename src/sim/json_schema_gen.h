// JSON that validates against a JSON Schema, for the simulator's tool-call
// arguments and response_format answers. A documented subset of JSON Schema
// (docs/sim.md, "Structured output"):
//   type (one name or a list: the first non-null one is generated), enum,
//   const, properties, required, additionalProperties, items, prefixItems,
//   minItems, maxItems, minLength, maxLength, minimum, maximum,
//   exclusiveMinimum, exclusiveMaximum, anyOf/oneOf (the first branch),
//   allOf (of object schemas: merged), $ref to "#/$defs/..." or
//   "#/definitions/...", format (date-time, date, time, email, uuid, uri).
// Annotations are ignored: title, description, default, examples, $schema,
// $id, $comment, deprecated, readOnly, writeOnly, nullable, strict.
// Any other keyword (uniqueItems, pattern, patternProperties, multipleOf,
// not, if/then/else, contains, propertyNames, minProperties, ...) is refused
// the way vLLM's guided decoding refuses it (llguidance via vLLM 0.24:
// "Grammar error: Unimplemented keys: [\"uniqueItems\"]", HTTP 400).
//
// Bounds: schemas nest at most 32 levels and hold at most 4096 subschemas;
// $ref chains are followed at most 32 deep. The output is Python json.dumps
// style (", " and ": " separators), as vLLM's tool parsers emit arguments.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "core/result.h"

namespace cgn::sim {

enum class SchemaError { kUnsupported, kInvalid, kTooLarge };

inline constexpr int kMaxSchemaDepth = 32;
inline constexpr size_t kMaxSchemaNodes = 4096;

// Checks the schema against the subset; the error message is vLLM's
// ("Grammar error: Unimplemented keys: [\"k1\", \"k2\"]") for unsupported
// keywords, a description of the problem otherwise.
Status<SchemaError> check_schema(const nlohmann::json& schema);

// A compact JSON text that validates against `schema` (checked first).
// Deterministic: the same schema always gives the same text.
Result<std::string, SchemaError> generate_json(const nlohmann::json& schema);

}  // namespace cgn::sim
