package engine

// ErrChangedSince is errChangedSince, for the tests of package engine_test.
var ErrChangedSince = errChangedSince
