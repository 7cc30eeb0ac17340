// Package loadavg lets a benchmark record the machine's load average when
// it starts and when it ends, as metrics of its result line, so that the
// benchmark report can flag runs during which the machine was busier than
// it has cores.
//
// It guarantees nothing about the load itself: the figures are the
// one-minute load average of /proc/loadavg, smoothed over a minute, and
// are not reported where that file does not exist.
package loadavg
