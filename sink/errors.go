package sink

import "errors"

// ErrClosed is returned by a Queue or a File used after Close.
var ErrClosed = errors.New("sink: closed")

// ErrLineTooLong is returned, wrapped with the line number, by ReadEvents
// when a line is longer than MaxLineBytes.
var ErrLineTooLong = errors.New("sink: line too long")

// ErrNilWriter is returned by NewQueue when it is given no Writer.
var ErrNilWriter = errors.New("sink: NewQueue with a nil Writer")

// ErrEventsUnavailable is returned, wrapped with the last write's error,
// by Queue.Durable while the Queue's writes fail: an event recorded now
// would not be kept (the disk is full, say).
var ErrEventsUnavailable = errors.New("sink: events cannot be written")
