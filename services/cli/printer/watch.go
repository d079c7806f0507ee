package printer

import (
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/no8s/no8s/libs/client"
)

// padding is the space between two table columns (as in every table here).
const padding = 3

// WatchTable prints the table of a watch (get -w): the header and the
// listed rows as one aligned table, then each later row at once in the same
// columns, as kubectl does. A later cell wider than its column shifts the
// rest of its own row only; the columns of earlier rows cannot move, as they
// are printed already.
type WatchTable struct {
	w      io.Writer
	widths []int
}

// NewWatchTable prints header and rows aligned and returns the table for
// the rows that follow. The columns are as wide as the widest of header,
// rows and sizing (rows that are not printed: values later rows may hold).
func NewWatchTable(w io.Writer, header []string, rows, sizing [][]string) (*WatchTable, error) {
	t := &WatchTable{w: w, widths: make([]int, len(header))}
	for _, r := range slices.Concat([][]string{header}, rows, sizing) {
		for i, c := range r {
			if i < len(t.widths) {
				t.widths[i] = max(t.widths[i], utf8.RuneCountInString(cell(c)))
			}
		}
	}
	if err := t.Row(header); err != nil {
		return nil, err
	}
	for _, r := range rows {
		if err := t.Row(r); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// Row prints one row in the table's columns.
func (t *WatchTable) Row(cols []string) error {
	var b strings.Builder
	for i, c := range cols {
		c = cell(c)
		b.WriteString(c)
		if i == len(cols)-1 {
			break
		}
		width := 0
		if i < len(t.widths) {
			width = t.widths[i]
		}
		b.WriteString(strings.Repeat(" ", max(width-utf8.RuneCountInString(c), 0)+padding))
	}
	b.WriteString("\n")
	_, err := io.WriteString(t.w, b.String())
	return err
}

// NewResourceWatchTable is the watch table of resources (ResourceHeader,
// ResourceRow): its STATUS and READY columns are sized for their widest
// values (reconciling, Unknown), so that later rows keep the columns.
func NewResourceWatchTable(w io.Writer, rows [][]string, wide bool) (*WatchTable, error) {
	header := ResourceHeader(wide)
	widest := make([]string, len(header))
	for i, h := range header {
		switch h {
		case "STATUS":
			widest[i] = client.StatusReconciling
		case "READY":
			widest[i] = "Unknown"
		}
	}
	return NewWatchTable(w, header, rows, [][]string{widest})
}
