// Package notes writes the change list of initlock's release notes from
// the git history: the subjects of the commits since the previous release
// tag, or since the first commit when there is none.
//
// It guarantees that the list names every non-merge commit reachable from
// HEAD and not from the previous tag, newest first, and says which range
// it covers. It does not group or rewrite the subjects.
package notes
