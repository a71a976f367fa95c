package ddb

// background is the DB's background work: the TTL sweeper.
type background struct{}

func (b *background) start(db *DB) {}

func (b *background) stop() {}
