package checkpoint

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// ObjectKey is the bucket key of tenant's checkpoint at seq. The inverted
// seq makes the newest checkpoint the first key listed.
func ObjectKey(tenant string, seq int64) string {
	return ObjectPrefix(tenant) + fmt.Sprintf("%019d", keySeqBase-seq) + ".note"
}

// keySeqBase - seq is a checkpoint key's number: 19 digits for every seq
// up to 2^53-1.
const keySeqBase int64 = 9_999_999_999_999_999

// ObjectPrefix is the key prefix of tenant's checkpoint objects.
func ObjectPrefix(tenant string) string {
	// PathEscape escapes '/', so one tenant's prefix never holds another's keys.
	return keys.CheckpointObjectPrefix + url.PathEscape(tenant) + "/"
}

// SeqOfObjectKey reads the seq a checkpoint object key names.
func SeqOfObjectKey(key string) (int64, bool) {
	name, ok := strings.CutSuffix(key[strings.LastIndexByte(key, '/')+1:], ".note")
	n, err := strconv.ParseInt(name, 10, 64)
	if !ok || err != nil || len(name) != 19 || n < 0 {
		return 0, false
	}
	return keySeqBase - n, true
}
