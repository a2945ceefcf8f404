// Package admission holds the tests that prove fedbr's CRDs refuse bad input at admission, with
// a message that says what is wrong, and accept every shipped sample.
package admission
