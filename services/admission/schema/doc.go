// Package schema compiles a resource type's OpenAPI v3 schema (the
// openAPIV3Schema of a Kubernetes-style custom resource definition) and admits
// resource specs against it: it applies the schema's defaults and then
// validates, reporting every violation by JSON pointer.
//
// The schema dialect is JSON Schema draft 2020-12 with the OpenAPI 3.0 quirks
// that CRD-style schemas rely on:
//
//   - nullable: true allows null (type T becomes [T, "null"], and null joins
//     an enum);
//   - boolean exclusiveMinimum/exclusiveMaximum (with minimum/maximum) are
//     rewritten into the numeric 2020-12 form;
//   - OpenAPI-only keywords (x-* extensions, example, discriminator, xml,
//     externalDocs) are ignored.
//
// format is asserted (email, date-time, uuid, ...). A schema is one
// self-contained document: only local references ("#...") are allowed and
// nothing is ever fetched. The top level must describe an object.
//
// Defaults are applied before validating (so a bad default surfaces), into
// missing properties only, following $ref, allOf, properties,
// patternProperties, additionalProperties and array items; jsonschema itself
// never applies them. Hostile specs are refused before validation: nesting
// deeper than 64 levels, or number literals that exact (math/big) arithmetic
// would make expensive.
//
// Compile once per resource type version; a *Schema is immutable and safe for
// concurrent use, and Admit never recompiles.
package schema
