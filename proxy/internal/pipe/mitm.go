package pipe

import (
	"sync"
	"time"
)

// logLimit lets one log line through per second; the metrics count them all.
type LogLimit struct {
	mu   sync.Mutex
	last time.Time
}

func (l *LogLimit) allow() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if time.Since(l.last) < time.Second {
		return false
	}
	l.last = time.Now()
	return true
}
