// Package notes writes the parts of initlock's release notes that come from
// the work tree: the change list from the git history (the subjects of the
// commits since the previous release tag, or since the first commit when
// there is none), the release series' changed defaults and upgrade notes
// from docs/upgrade-notes.md, and its row of the compatibility table of
// docs/install.md.
//
// It guarantees that the list names every non-merge commit reachable from
// HEAD and not from the previous tag, newest first, and says which range
// it covers; and that a release series without its changed defaults, its
// upgrade notes or its compatibility row has no release notes (make
// release fails). It does not group or rewrite the subjects, nor check
// that what the sections say is true.
package notes
