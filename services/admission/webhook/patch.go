package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
)

// Patchable lists the members of the resource document that a mutating
// webhook may change, with everything below them. A patch operation that
// writes anywhere else (path of add, remove, replace, move and copy; from of
// move) is refused, and the webhook counts as failed. test, and copy's from,
// only read and may point anywhere.
var patchable = []string{"spec", "labels", "annotations"}

// MaxCopyBytes bounds how much a patch's copy operations may add.
const MaxCopyBytes = 1 << 20

type patchOp struct {
	Op    *string          `json:"op"`
	Path  *string          `json:"path"`
	From  *string          `json:"from"`
	Value *json.RawMessage `json:"value"`
}

// checkOperation checks one RFC 6902 operation: its members and that what
// it writes is patchable.
func checkOperation(raw json.RawMessage) error {
	var op patchOp
	if err := json.Unmarshal(raw, &op); err != nil {
		return fmt.Errorf("not a JSON Patch operation: %v", err)
	}
	if op.Op == nil {
		return errors.New(`no "op"`)
	}
	if op.Path == nil {
		return errors.New(`no "path"`)
	}
	var hasValue, hasFrom, writes, fromWrites bool
	switch *op.Op {
	case "add", "replace":
		hasValue, writes = true, true
	case "test":
		hasValue = true
	case "remove":
		writes = true
	case "move":
		hasFrom, writes, fromWrites = true, true, true
	case "copy":
		hasFrom, writes = true, true
	default:
		return fmt.Errorf("%q is not a JSON Patch op: add, remove, replace, move, copy or test", *op.Op)
	}
	if hasValue && op.Value == nil {
		return fmt.Errorf(`%s needs a "value"`, *op.Op)
	}
	if hasFrom && op.From == nil {
		return fmt.Errorf(`%s needs a "from"`, *op.Op)
	}
	if err := checkPointer(*op.Path, writes); err != nil {
		return fmt.Errorf("path %q: %w", *op.Path, err)
	}
	if hasFrom {
		if err := checkPointer(*op.From, fromWrites); err != nil {
			return fmt.Errorf("from %q: %w", *op.From, err)
		}
	}
	return nil
}

// checkPointer checks an RFC 6901 JSON pointer and, when the operation
// writes there, that it is within a patchable member.
func checkPointer(p string, writes bool) error {
	if p == "" {
		if writes {
			return errors.New("a patch may not replace the whole resource: it may change only /spec, /labels and /annotations")
		}
		return nil
	}
	if p[0] != '/' {
		return errors.New(`a JSON pointer starts with "/"`)
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 == len(p) || (p[i+1] != '0' && p[i+1] != '1')) {
			return errors.New(`"~" must be followed by 0 or 1`)
		}
	}
	if !writes {
		return nil
	}
	top, _, _ := strings.Cut(p[1:], "/")
	for _, m := range patchable {
		if top == m {
			return nil
		}
	}
	return fmt.Errorf("outside /spec, /labels and /annotations: a webhook may change only those")
}

// ApplyPatch applies a checked patch to a resource document (a JSON
// object). Beyond the checks of ParseResponse it makes sure that no member
// other than the patchable ones changed.
func ApplyPatch(doc []byte, patch jsonpatch.Patch) ([]byte, error) {
	opts := jsonpatch.NewApplyOptions()
	opts.SupportNegativeIndices = false
	opts.AccumulatedCopySizeLimit = MaxCopyBytes
	opts.EscapeHTML = false
	out, err := patch.ApplyWithOptions(doc, opts)
	if err != nil {
		return nil, fmt.Errorf("the patch cannot be applied: %v", err)
	}
	if err := sameOutsidePatchable(doc, out); err != nil {
		return nil, err
	}
	return out, nil
}

func sameOutsidePatchable(before, after []byte) error {
	var b, a map[string]json.RawMessage
	if err := json.Unmarshal(before, &b); err != nil {
		return fmt.Errorf("the resource document is not a JSON object: %v", err)
	}
	if err := json.Unmarshal(after, &a); err != nil {
		return fmt.Errorf("the patched document is not a JSON object: %v", err)
	}
	for k, av := range a {
		if isPatchable(k) {
			continue
		}
		bv, ok := b[k]
		if !ok || !sameJSON(av, bv) {
			return fmt.Errorf("the patch changed %q: a webhook may change only /spec, /labels and /annotations", k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok && !isPatchable(k) {
			return fmt.Errorf("the patch removed %q: a webhook may change only /spec, /labels and /annotations", k)
		}
	}
	return nil
}

func isPatchable(k string) bool {
	for _, m := range patchable {
		if k == m {
			return true
		}
	}
	return false
}

func sameJSON(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var av, bv any
	if json.Unmarshal(a, &av) != nil || json.Unmarshal(b, &bv) != nil {
		return false
	}
	return reflect.DeepEqual(av, bv)
}
