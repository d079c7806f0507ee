package manifest

import (
	"bytes"
)

// Chunk is one document of a multi-document stream, as text.
type Chunk struct {
	// Line is the 1-based line of the input where the document's text
	// starts (the separator's line when content follows the separator on
	// the same line).
	Line int
	// Data is the document's text.
	Data []byte
}

// Split cuts a stream into its documents. A line that is exactly `---`, or
// `---` followed by a space or a tab, separates documents (text after it on
// the same line belongs to the next document, as in `--- {a: 1}`); a line
// `...` (alone or followed by a space or a tab) ends a document. Lines are compared without a trailing carriage
// return, so CRLF files split the same way. Documents that hold nothing but
// blank lines and comments are left out.
func Split(data []byte) []Chunk {
	var (
		chunks []Chunk
		cur    []byte
		start  = 1
		empty  = true
	)
	flush := func() {
		if !empty {
			chunks = append(chunks, Chunk{Line: start, Data: cur})
		}
		cur, empty = nil, true
	}
	line := 0
	for len(data) > 0 {
		line++
		var l []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			l, data = data[:i+1], data[i+1:]
		} else {
			l, data = data, nil
		}
		text := bytes.TrimRight(l, "\r\n")
		switch {
		case isSeparator(text):
			flush()
			// "--- --- x" starts an empty document, then the one holding x;
			// "--- ..." is an empty document.
			rest := text
			for isSeparator(rest) {
				rest = bytes.TrimLeft(rest[3:], " \t")
			}
			if isEnd(rest) {
				start = line + 1
				continue
			}
			if isContent(rest) {
				start, empty = line, false
				cur = append(append(cur, rest...), '\n')
			} else {
				start = line + 1
			}
			continue
		case isEnd(text):
			flush()
			start = line + 1
			continue
		}
		if empty && !isContent(text) {
			// Blank lines and comments before a document's first content
			// are not part of it: the document starts at its content.
			start = line + 1
			continue
		}
		if empty {
			start, empty = line, false
		}
		cur = append(cur, l...)
	}
	flush()
	return chunks
}

// isSeparator reports whether a line (without its line break) separates
// documents.
func isSeparator(text []byte) bool {
	if !bytes.HasPrefix(text, []byte("---")) {
		return false
	}
	return len(text) == 3 || text[3] == ' ' || text[3] == '\t'
}

// isEnd reports whether a line (without its line break) ends a document:
// `...`, alone or followed by a space or a tab.
func isEnd(text []byte) bool {
	if !bytes.HasPrefix(text, []byte("...")) {
		return false
	}
	return len(text) == 3 || text[3] == ' ' || text[3] == '\t'
}

// isContent reports whether a line holds more than blanks and a comment.
func isContent(text []byte) bool {
	t := bytes.TrimLeft(text, " \t\r")
	return len(t) > 0 && t[0] != '#'
}
