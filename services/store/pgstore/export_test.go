package pgstore

// GroupStats returns how many writes shared a transaction and how many of
// them ran again alone.
func GroupStats(s *Store) (shared, retried int64) {
	return s.group.shared.Load(), s.group.retried.Load()
}

// WithoutGroupCommit makes s run every write in a transaction of its own.
func WithoutGroupCommit(s *Store) { s.group.alone = true }

// SetListProbe sets the smallest window a selective list walks before it
// turns to the labels' index.
func SetListProbe(s *Store, n int) { s.probe = n }
