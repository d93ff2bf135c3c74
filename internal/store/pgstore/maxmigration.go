package pgstore

// MaxMigration is the number of the newest migration this build knows.
func MaxMigration() int {
	ms, err := migrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].Version
}
