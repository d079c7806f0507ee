package outbox

import (
	"slices"
	"testing"
	"time"

	"github.com/no8s/no8s/services/store/storage"
)

func TestGapWatchNotesTheAbsentRanges(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var g gapWatch
	rows := []storage.OutboxRow{{Revision: 12}, {Revision: 13}, {Revision: 17}}
	g.note(10, 20, rows, t0)
	g.note(20, 22, []storage.OutboxRow{{Revision: 21}, {Revision: 22}}, t0) // none absent
	g.note(22, 25, nil, t0.Add(time.Second))
	want := []gap{{10, 11, t0}, {13, 16, t0}, {17, 20, t0}, {22, 25, t0.Add(time.Second)}}
	if !slices.Equal(g.pending, want) {
		t.Fatalf("pending %v, want %v", g.pending, want)
	}
	if due := g.due(t0); !slices.Equal(due, want[:3]) {
		t.Fatalf("due at t0: %v, want %v", due, want[:3])
	}
	if due := g.due(t0); len(due) != 0 {
		t.Fatalf("due again: %v", due)
	}
	if due := g.due(t0.Add(time.Second)); !slices.Equal(due, want[3:]) {
		t.Fatalf("due a second later: %v, want %v", due, want[3:])
	}
}

func TestGapWatchIsBounded(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var g gapWatch
	for i := range int64(maxGaps + 10) {
		g.note(2*i, 2*i+1, nil, t0) // revision 2i+1 absent
	}
	if len(g.pending) != maxGaps || g.pending[0].after != 20 {
		t.Fatalf("%d ranges kept, the oldest after %d; want %d, the oldest after 20", len(g.pending), g.pending[0].after, maxGaps)
	}
	if due := g.due(t0); len(due) != maxGapChecks {
		t.Fatalf("%d due in one round, want %d", len(due), maxGapChecks)
	}
}
