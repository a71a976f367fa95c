package attr

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"sort"
)

// The binary form of items, for the server's log and snapshots: compact, and
// decoded with few allocations (an item's names and texts share one string).
//
//	item  = uvarint(count) { string(name) value }   names in sorted order
//	value = kind byte, then
//	        S, N, B: string;  BOOL: 0 or 1;  NULL: nothing
//	        M: item;  L: uvarint(count) { value }
//	        SS, NS, BS: uvarint(count) { string }
//	string = uvarint(len) bytes
//
// Numbers are their canonical texts, so decoding never re-parses them.

// ErrCorrupt is returned for bytes that are no encoded item.
var ErrCorrupt = errors.New("attr: corrupt binary item")

// AppendItem appends the binary form of it to b.
func AppendItem(b []byte, it Item) []byte {
	names := make([]string, 0, len(it))
	for k := range it {
		names = append(names, k)
	}
	sort.Strings(names)
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, k := range names {
		b = appendStr(b, k)
		b = appendValue(b, it[k])
	}
	return b
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendValue(b []byte, v *Value) []byte {
	b = append(b, byte(v.Kind))
	switch v.Kind {
	case KindS, KindN:
		b = appendStr(b, v.S)
	case KindB:
		b = binary.AppendUvarint(b, uint64(len(v.B)))
		b = append(b, v.B...)
	case KindBOOL:
		if v.Bool {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	case KindM:
		b = AppendItem(b, v.M)
	case KindL:
		b = binary.AppendUvarint(b, uint64(len(v.L)))
		for _, e := range v.L {
			b = appendValue(b, e)
		}
	case KindSS, KindNS:
		b = binary.AppendUvarint(b, uint64(len(v.SS)))
		for _, s := range v.SS {
			b = appendStr(b, s)
		}
	case KindBS:
		b = binary.AppendUvarint(b, uint64(len(v.BS)))
		for _, e := range v.BS {
			b = binary.AppendUvarint(b, uint64(len(e)))
			b = append(b, e...)
		}
	}
	return b
}

// AppendFramed appends it's binary form preceded by its length, the form the
// log and snapshots store (DecodeFramed reads it back).
func AppendFramed(b []byte, it Item) []byte {
	start := len(b)
	b = AppendItem(b, it)
	n := len(b) - start
	var hdr [binary.MaxVarintLen64]byte
	h := binary.PutUvarint(hdr[:], uint64(n))
	b = append(b, hdr[:h]...)
	copy(b[start+h:], b[start:start+n])
	copy(b[start:], hdr[:h])
	return b
}

// DecodeFramed decodes the length-prefixed item at the start of b and returns it
// with the bytes after it. The item's names and texts are substrings of one copy
// of its bytes, so it holds nothing of b.
func DecodeFramed(b []byte) (Item, []byte, error) {
	n, h := binary.Uvarint(b)
	if h <= 0 || n > uint64(len(b)-h) {
		return nil, nil, ErrCorrupt
	}
	d := decoder{s: string(b[h : h+int(n)])}
	it := d.item()
	if d.err == nil && d.pos != len(d.s) {
		d.err = ErrCorrupt
	}
	if d.err != nil {
		return nil, nil, d.err
	}
	return it, b[h+int(n):], nil
}

// DecodeFramedIn is DecodeFramed for a b that is never changed again and lives as
// long as the items decoded from it: their names and texts are substrings of
// whole (b's bytes as a string), so decoding copies nothing but binaries. A
// snapshot loaded whole decodes its items so.
func DecodeFramedIn(whole string, off int) (Item, int, error) {
	n, h := uvarintString(whole[off:])
	if h <= 0 || n > uint64(len(whole)-off-h) {
		return nil, 0, ErrCorrupt
	}
	start := off + h
	d := decoder{s: whole[:start+int(n)], pos: start}
	it := d.item()
	if d.err == nil && d.pos != start+int(n) {
		d.err = ErrCorrupt
	}
	if d.err != nil {
		return nil, 0, d.err
	}
	return it, start + int(n), nil
}

type decoder struct {
	s   string
	pos int
	err error
}

func (d *decoder) uvarint() int {
	if d.err != nil {
		return 0
	}
	v, n := uvarintString(d.s[d.pos:])
	if n <= 0 || v > uint64(len(d.s)) {
		d.err = ErrCorrupt
		return 0
	}
	d.pos += n
	return int(v)
}

func uvarintString(s string) (uint64, int) {
	var x uint64
	var sh uint
	for i := 0; i < len(s) && i < binary.MaxVarintLen64; i++ {
		c := s[i]
		if c < 0x80 {
			return x | uint64(c)<<sh, i + 1
		}
		x |= uint64(c&0x7f) << sh
		sh += 7
	}
	return 0, 0
}

func (d *decoder) str() string {
	n := d.uvarint()
	if d.err != nil || d.pos+n > len(d.s) {
		d.err = ErrCorrupt
		return ""
	}
	s := d.s[d.pos : d.pos+n]
	d.pos += n
	return s
}

func (d *decoder) item() Item {
	n := d.uvarint()
	it := make(Item, min(n, len(d.s)))
	for i := 0; i < n && d.err == nil; i++ {
		k := d.str()
		it[k] = d.value()
	}
	return it
}

func (d *decoder) value() *Value {
	if d.err != nil || d.pos >= len(d.s) {
		d.err = ErrCorrupt
		return nil
	}
	k := Kind(d.s[d.pos])
	d.pos++
	v := &Value{Kind: k}
	switch k {
	case KindS, KindN:
		v.S = d.str()
	case KindB:
		v.B = []byte(d.str())
	case KindBOOL:
		if d.pos >= len(d.s) {
			d.err = ErrCorrupt
			return nil
		}
		v.Bool = d.s[d.pos] == 1
		d.pos++
	case KindNULL:
	case KindM:
		v.M = d.item()
	case KindL:
		n := d.uvarint()
		l := make([]*Value, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			l = append(l, d.value())
		}
		v.L = l
	case KindSS, KindNS:
		n := d.uvarint()
		ss := make([]string, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			ss = append(ss, d.str())
		}
		v.SS = ss
	case KindBS:
		n := d.uvarint()
		bs := make([][]byte, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			bs = append(bs, []byte(d.str()))
		}
		v.BS = bs
	default:
		d.err = ErrCorrupt
	}
	return v
}

// LookupFramed returns the top-level attribute name of the framed item in blob
// (nil when it has none), decoding that attribute only.
func LookupFramed(blob, name string) *Value {
	n, h := uvarintString(blob)
	if h <= 0 || n > uint64(len(blob)-h) {
		return nil
	}
	d := decoder{s: blob[:h+int(n)], pos: h}
	count := d.uvarint()
	for i := 0; i < count && d.err == nil; i++ {
		if d.str() == name {
			return d.value()
		}
		d.skip()
	}
	return nil
}

// skip passes over one value without building it.
func (d *decoder) skip() {
	if d.err != nil || d.pos >= len(d.s) {
		d.err = ErrCorrupt
		return
	}
	k := Kind(d.s[d.pos])
	d.pos++
	switch k {
	case KindS, KindN, KindB:
		d.str()
	case KindBOOL:
		d.pos++
	case KindNULL:
	case KindM:
		n := d.uvarint()
		for i := 0; i < n && d.err == nil; i++ {
			d.str()
			d.skip()
		}
	case KindL:
		n := d.uvarint()
		for i := 0; i < n && d.err == nil; i++ {
			d.skip()
		}
	case KindSS, KindNS, KindBS:
		n := d.uvarint()
		for i := 0; i < n && d.err == nil; i++ {
			d.str()
		}
	default:
		d.err = ErrCorrupt
	}
}

// FramedEnd returns the offset in whole just past the framed item at off.
func FramedEnd(whole string, off int) (int, error) {
	n, h := uvarintString(whole[off:])
	if h <= 0 || n > uint64(len(whole)-off-h) {
		return 0, ErrCorrupt
	}
	return off + h + int(n), nil
}

// FramedSize returns the size by AWS's rule (Item.Size) of the framed item in
// blob, without building it.
func FramedSize(blob string) (int, error) {
	n, h := uvarintString(blob)
	if h <= 0 || n > uint64(len(blob)-h) {
		return 0, ErrCorrupt
	}
	d := decoder{s: blob[:h+int(n)], pos: h}
	size := d.membersSize(false)
	if d.err == nil && d.pos != len(d.s) {
		d.err = ErrCorrupt
	}
	return size, d.err
}

// membersSize walks an item's (or a map's) members and returns their size; inMap
// counts each member as a map does (a byte more).
func (d *decoder) membersSize(inMap bool) int {
	count := d.uvarint()
	size := 0
	for i := 0; i < count && d.err == nil; i++ {
		size += len(d.str()) + d.valueSize()
		if inMap {
			size++
		}
	}
	return size
}

func (d *decoder) valueSize() int {
	if d.err != nil || d.pos >= len(d.s) {
		d.err = ErrCorrupt
		return 0
	}
	k := Kind(d.s[d.pos])
	d.pos++
	switch k {
	case KindS, KindB:
		return len(d.str())
	case KindN:
		return numberSize(d.str())
	case KindBOOL:
		d.pos++
		return 1
	case KindNULL:
		return 1
	case KindM:
		return 3 + d.membersSize(true)
	case KindL:
		n := d.uvarint()
		size := 3
		for i := 0; i < n && d.err == nil; i++ {
			size += 1 + d.valueSize()
		}
		return size
	case KindSS, KindBS:
		n := d.uvarint()
		size := 0
		for i := 0; i < n && d.err == nil; i++ {
			size += len(d.str())
		}
		return size
	case KindNS:
		n := d.uvarint()
		size := 0
		for i := 0; i < n && d.err == nil; i++ {
			size += numberSize(d.str())
		}
		return size
	}
	d.err = ErrCorrupt
	return 0
}

// AppendFramedJSON appends the DynamoDB JSON of the framed item in blob (as
// Item.MarshalJSON writes it: members in name order) without building the item.
func AppendFramedJSON(dst []byte, blob string) ([]byte, error) {
	n, h := uvarintString(blob)
	if h <= 0 || n > uint64(len(blob)-h) {
		return dst, ErrCorrupt
	}
	d := decoder{s: blob[:h+int(n)], pos: h}
	dst = d.membersJSON(dst)
	if d.err == nil && d.pos != len(d.s) {
		d.err = ErrCorrupt
	}
	return dst, d.err
}

func (d *decoder) membersJSON(dst []byte) []byte {
	count := d.uvarint()
	dst = append(dst, '{')
	for i := 0; i < count && d.err == nil; i++ {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendQuoted(dst, d.str())
		dst = append(dst, ':')
		dst = d.valueJSON(dst)
	}
	return append(dst, '}')
}

func (d *decoder) valueJSON(dst []byte) []byte {
	if d.err != nil || d.pos >= len(d.s) {
		d.err = ErrCorrupt
		return dst
	}
	k := Kind(d.s[d.pos])
	d.pos++
	dst = append(dst, `{"`...)
	dst = append(dst, k.String()...)
	dst = append(dst, `":`...)
	switch k {
	case KindS, KindN:
		dst = appendQuoted(dst, d.str())
	case KindB:
		dst = appendBase64(dst, d.str())
	case KindBOOL:
		if d.pos < len(d.s) && d.s[d.pos] == 1 {
			dst = append(dst, "true"...)
		} else {
			dst = append(dst, "false"...)
		}
		d.pos++
	case KindNULL:
		dst = append(dst, "true"...)
	case KindM:
		dst = d.membersJSON(dst)
	case KindL:
		n := d.uvarint()
		dst = append(dst, '[')
		for i := 0; i < n && d.err == nil; i++ {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = d.valueJSON(dst)
		}
		dst = append(dst, ']')
	case KindSS, KindNS, KindBS:
		n := d.uvarint()
		dst = append(dst, '[')
		for i := 0; i < n && d.err == nil; i++ {
			if i > 0 {
				dst = append(dst, ',')
			}
			if k == KindBS {
				dst = appendBase64(dst, d.str())
			} else {
				dst = appendQuoted(dst, d.str())
			}
		}
		dst = append(dst, ']')
	default:
		d.err = ErrCorrupt
	}
	return append(dst, '}')
}

func appendBase64(dst []byte, s string) []byte {
	enc := base64.StdEncoding
	n := len(dst)
	dst = append(dst, make([]byte, enc.EncodedLen(len(s))+2)...)
	dst[n] = '"'
	enc.Encode(dst[n+1:], []byte(s))
	dst[len(dst)-1] = '"'
	return dst
}

// appendQuoted appends s as a JSON string, escaping what JSON requires (and <, >
// and & as encoding/json does).
func appendQuoted(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
