// Package httpsource holds what admission and registry-sync share about the
// built-in type HttpSource (issue 18, scope 2): its spec with its field
// names and defaults, the static checks admission runs on it, and the
// mapping of a polled JSON body to resources: the list at itemsPointer
// (RFC 6901), each item's name by JSON pointer or template, its spec by
// template or JSON pointer, its labels by template. Templates are the
// TenantTemplate's (package tenancy: text/template, the hermetic sprig
// functions, missing keys are errors), run with the item as data.
package httpsource
