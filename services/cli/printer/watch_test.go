package printer

import (
	"bytes"
	"strings"
	"testing"
)

// A watch's header and listed rows are the table Resources prints, and a
// later row keeps its columns (a wider cell shifts only its own row).
func TestWatchTable(t *testing.T) {
	items := sampleResources()
	for _, wide := range []bool{false, true} {
		var want bytes.Buffer
		format := FormatTable
		if wide {
			format = FormatWide
		}
		if err := Resources(&want, items, format, now); err != nil {
			t.Fatal(err)
		}
		rows := make([][]string, len(items))
		for i := range items {
			rows[i] = ResourceRow(&items[i], wide, now)
		}
		var got bytes.Buffer
		tbl, err := NewWatchTable(&got, ResourceHeader(wide), rows, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Fatalf("wide=%v: the listed rows\n%s\nare not Resources' table\n%s", wide, got.String(), want.String())
		}
		got.Reset()
		if err := tbl.Row(rows[1]); err != nil {
			t.Fatal(err)
		}
		if lines := strings.Split(want.String(), "\n"); got.String() != lines[2]+"\n" {
			t.Fatalf("wide=%v: a later row\n%q\nis not aligned as\n%q", wide, got.String(), lines[2])
		}
	}
	var got bytes.Buffer
	tbl, err := NewWatchTable(&got, []string{"A", "B", "C"}, [][]string{{"x", "y", "z"}}, [][]string{{"", "yy", ""}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tbl.Row([]string{"longer\tcell", "y", "last"}); err != nil {
		t.Fatal(err)
	}
	if want := "A   B    C\nx   y    z\nlonger cell   y    last\n"; got.String() != want {
		t.Fatalf("got\n%q\nwant\n%q", got.String(), want)
	}
}
