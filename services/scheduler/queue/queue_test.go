package queue

import (
	"slices"
	"testing"
	"time"
)

func TestDelayQueue(t *testing.T) {
	q := New()
	t0 := time.Unix(1000, 0)
	q.Schedule(1, t0.Add(3*time.Second))
	q.Schedule(2, t0.Add(1*time.Second))
	q.Schedule(3, t0.Add(2*time.Second))
	q.Schedule(1, t0.Add(5*time.Second)) // later: keeps 3s
	q.Schedule(3, t0)                    // earlier: moves
	if q.Len() != 3 {
		t.Fatalf("len %d", q.Len())
	}
	if at, ok := q.Next(); !ok || !at.Equal(t0) {
		t.Fatalf("next %v %v", at, ok)
	}
	if got := q.PopDue(t0.Add(time.Second)); !slices.Equal(got, []int64{3, 2}) {
		t.Fatalf("due %v", got)
	}
	q.Remove(1)
	q.Remove(42)
	if got := q.PopDue(t0.Add(time.Hour)); len(got) != 0 || q.Len() != 0 {
		t.Fatalf("after remove: %v len %d", got, q.Len())
	}
	if _, ok := q.Next(); ok {
		t.Fatal("empty queue has a next")
	}
	for i := range int64(100) {
		q.Schedule(i, t0.Add(time.Duration(100-i)*time.Millisecond))
	}
	got := q.PopDue(t0.Add(time.Minute))
	if len(got) != 100 || got[0] != 99 || got[99] != 0 {
		t.Fatalf("order %v", got)
	}
}
