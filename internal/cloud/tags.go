package cloud

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// EC2's limits on one tag. The EC2 User Guide ("Tag your Amazon EC2 resources", Tag
// restrictions) allows keys of 128 and values of 256 Unicode characters; the EC2 API
// Reference's Tag type says keys of 127. fedbr keeps to the stricter of the two. The aws:
// prefix is AWS's, in any case.
const (
	MaxTagKeyChars   = 127
	MaxTagValueChars = 256
)

// ErrInvalidTag marks a tag EC2 refuses: a key or value too long, or a key with AWS's prefix.
var ErrInvalidTag = errors.New("invalid tag")

// CheckTag says why EC2 would refuse the tag k=v, or nil.
func CheckTag(k, v string) error {
	switch {
	case k == "":
		return fmt.Errorf("%w: an empty key", ErrInvalidTag)
	case strings.HasPrefix(strings.ToLower(k), "aws:"):
		return fmt.Errorf("%w: key %q starts with aws:, which AWS reserves (in any case)", ErrInvalidTag, k)
	case utf8.RuneCountInString(k) > MaxTagKeyChars:
		return fmt.Errorf("%w: key %q is %d characters, at most %d", ErrInvalidTag, k, utf8.RuneCountInString(k), MaxTagKeyChars)
	case utf8.RuneCountInString(v) > MaxTagValueChars:
		return fmt.Errorf("%w: the value of %q is %d characters, at most %d", ErrInvalidTag, k, utf8.RuneCountInString(v), MaxTagValueChars)
	}
	return nil
}
