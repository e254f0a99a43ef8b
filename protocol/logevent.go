package protocol

// LogEvent is one event of a Group's log as its authority signed it, the
// form in which a client that keeps no store reads the log.
type LogEvent struct {
	Sequence uint64
	// Raw is the signed event envelope's JCS bytes.
	Raw []byte
}
