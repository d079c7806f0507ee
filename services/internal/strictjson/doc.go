// Package strictjson holds the rules every JSON document the API takes must
// meet beyond JSON syntax, in one place for every body-reading path: the
// gateway checks each request body with it, admission and the store check
// specs and schemas with it again before they are compiled or stored.
//
// A document is refused, with a JSON pointer to each offending location, when
// it has
//
//   - invalid UTF-8, or a \u escape that is a lone UTF-16 surrogate (encoding/json
//     would silently replace either with U+FFFD);
//   - an object with a duplicate key (encoding/json would keep the last);
//   - a NUL character (\u0000) in any string or key (PostgreSQL's text and jsonb
//     cannot hold it);
//   - a number that does not survive being stored: see [CheckNumber].
//
// The package also defines the value semantics the store relies on:
// [Expand] writes a number the way PostgreSQL's jsonb reads it back, and
// [Equal] compares two documents as JSON values, numbers by value, so that an
// equal spec in another notation is no change.
package strictjson
