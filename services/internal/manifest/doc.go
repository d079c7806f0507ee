// Package manifest is the no8s document format: YAML or JSON documents, any
// number to a file separated by `---` lines, each one a Namespace, a
// ResourceType, an AdmissionWebhook or a Resource (docs/cli.md describes the
// format). Split
// cuts a stream into documents, Parse decodes and checks them (every
// problem by file, document, line and JSON pointer), Read takes files,
// folders and standard input.
package manifest
