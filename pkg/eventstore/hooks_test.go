package eventstore

// PendingForTest is how many Emits of tenant wait for their group-commit
// leader: tests poll it to know a batch has formed.
func PendingForTest(s *Store, tenant string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.tenants[tenant]; q != nil {
		return len(q.pending)
	}
	return 0
}
