// Package queue is the scheduler's delay queue: one wake-up time per
// resource, popped when due. It is not safe for concurrent use; the
// scheduler's loop owns it.
package queue

import (
	"container/heap"
	"time"
)

// Delay holds at most one wake-up per id.
type Delay struct {
	h   items
	pos map[int64]int
}

type item struct {
	id int64
	at time.Time
}

type items struct {
	list []item
	pos  map[int64]int
}

func (q items) Len() int           { return len(q.list) }
func (q items) Less(i, j int) bool { return q.list[i].at.Before(q.list[j].at) }
func (q items) Swap(i, j int) {
	q.list[i], q.list[j] = q.list[j], q.list[i]
	q.pos[q.list[i].id] = i
	q.pos[q.list[j].id] = j
}
func (q *items) Push(x any) {
	it := x.(item)
	q.pos[it.id] = len(q.list)
	q.list = append(q.list, it)
}
func (q *items) Pop() any {
	it := q.list[len(q.list)-1]
	q.list = q.list[:len(q.list)-1]
	delete(q.pos, it.id)
	return it
}

// New returns an empty queue.
func New() *Delay {
	pos := map[int64]int{}
	return &Delay{h: items{pos: pos}, pos: pos}
}

// Schedule asks for a wake-up of id at at. An earlier wake-up already queued
// for id is kept (a spurious early wake-up is harmless: the caller looks
// again and schedules anew); a later one is moved forward.
func (d *Delay) Schedule(id int64, at time.Time) {
	if i, ok := d.pos[id]; ok {
		if at.Before(d.h.list[i].at) {
			d.h.list[i].at = at
			heap.Fix(&d.h, i)
		}
		return
	}
	heap.Push(&d.h, item{id: id, at: at})
}

// Remove drops id's wake-up.
func (d *Delay) Remove(id int64) {
	if i, ok := d.pos[id]; ok {
		heap.Remove(&d.h, i)
	}
}

// Len is the number of queued wake-ups.
func (d *Delay) Len() int { return d.h.Len() }

// Next returns the earliest wake-up time; ok is false when empty.
func (d *Delay) Next() (at time.Time, ok bool) {
	if d.h.Len() == 0 {
		return time.Time{}, false
	}
	return d.h.list[0].at, true
}

// PopDue removes and returns the ids due at now, earliest first.
func (d *Delay) PopDue(now time.Time) []int64 {
	var out []int64
	for d.h.Len() > 0 && !d.h.list[0].at.After(now) {
		out = append(out, heap.Pop(&d.h).(item).id)
	}
	return out
}
