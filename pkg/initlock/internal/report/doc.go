// Package report declares how a lock call reports to its caller: the
// sentinel errors and the *Error that Lock and Unlock return, and the
// events they emit on the Cluster. It declares them once: package initlock
// exports them to providers, and the engine returns and emits them.
//
// It holds no logic beyond the error's message.
package report
