package report

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"reflect"
	"strings"
)

// Redaction scheme (for reports that leave the company):
//
//   - Every IP address is replaced by a pseudonym, except the ones that name
//     no customer host: link-local (169.254.0.0/16, fe80::/10, and link-local
//     multicast), the EC2 service range fd00:ec2::/64 (IMDS, DNS, NTP over
//     IPv6) and the unspecified addresses. Ports are kept.
//   - A pseudonym is an address of the same family in a documentation range,
//     so that "ip:port" still parses and the redacted recording can be
//     analyzed again: IPv4 in 198.18.0.0/15 (RFC 2544), IPv6 in 2001:db8::/32
//     (RFC 3849). It is derived with HMAC-SHA256 under a random key that is
//     never written anywhere, so the 2^32 IPv4 addresses cannot be tried one
//     by one against it; a collision takes the next derivation. Should the
//     131,072 IPv4 pseudonyms run out (a flood from spoofed sources), IPv6
//     pseudonyms are used.
//   - One Redact call maps an address to the same pseudonym everywhere: the
//     typed fields of the recording (flow keys, the VPC resolver), and every
//     string of the result, recording and environment (summaries, flow rows,
//     the command line), where addresses are found as text, including the
//     dashed form of EC2 host names (ip-10-0-0-10). Two calls use two keys.
//   - The host name becomes "host-" and 8 hex digits of its keyed hash,
//     wherever it or its first label appears as a word.
//
//   - DNS names and IMDS role names of the link-local detail: see
//     redact_names.go.
//
// Every string is scanned, not a list of fields, so that a field added later
// cannot leak.

// Redact returns a copy of in with every address and host name replaced as
// described above. in itself is not modified.
func Redact(in Input) Input {
	key := make([]byte, 32)
	rand.Read(key) // never fails (crypto/rand)
	return newRedactor(key).input(in)
}

// ec2Services is the IPv6 range of the EC2 link-local services.
var ec2Services = netip.MustParsePrefix("fd00:ec2::/64")

// keepAddr tells whether an address names no customer host and stays.
func keepAddr(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsUnspecified() ||
		ec2Services.Contains(a.WithZone(""))
}

// Pseudonym ranges.
var (
	pseudo4 = netip.MustParsePrefix("198.18.0.0/15")
	pseudo6 = netip.MustParsePrefix("2001:db8::/32")
)

// maxProbes bounds the derivations tried for one IPv4 pseudonym before
// falling back to IPv6 (the IPv4 range is nearly full by then).
const maxProbes = 64

type redactor struct {
	key   []byte
	addrs map[netip.Addr]netip.Addr
	used  map[netip.Addr]bool
	// hosts maps host names and their first labels to pseudonyms, longest
	// first so that a full name is replaced before its label.
	hosts []hostRename
	plain map[reflect.Type]bool
	// names maps the DNS names and IMDS role names of the link-local
	// detail to pseudonyms, longest first (redact_names.go); keepLabels
	// are the labels a DNS name keeps.
	names      []hostRename
	keepLabels map[string]bool
}

type hostRename struct{ from, to string }

func newRedactor(key []byte) *redactor {
	return &redactor{key: key, addrs: make(map[netip.Addr]netip.Addr), used: make(map[netip.Addr]bool),
		plain: make(map[reflect.Type]bool)}
}

func (r *redactor) input(in Input) Input {
	var names []string
	if in.Result != nil {
		names = append(names, in.Result.Trace.Hostname)
	}
	if in.Recording != nil {
		names = append(names, in.Recording.Meta.Hostname)
	}
	names = append(names, in.Env.Hostname)
	for _, n := range names {
		r.addHost(n)
	}
	r.addLinkLocalNames(in)
	out := r.copy(reflect.ValueOf(in)).Interface().(Input)
	if out.Recording != nil {
		for i, p := range out.Recording.LinkLocalPayloads {
			out.Recording.LinkLocalPayloads[i] = r.linkLocalPayload(p)
		}
	}
	return out
}

// addHost registers a host name and its first label.
func (r *redactor) addHost(name string) {
	if name == "" {
		return
	}
	for _, h := range r.hosts {
		if h.from == name {
			return
		}
	}
	to := "host-" + hex.EncodeToString(r.mac("host", []byte(name)))[:8]
	r.hosts = append(r.hosts, hostRename{name, to})
	if label, _, found := strings.Cut(name, "."); found && label != "" {
		r.hosts = append(r.hosts, hostRename{label, to})
	}
	// Longest first: "ip-10-0-0-10.ec2.internal" before "ip-10-0-0-10".
	for i := 1; i < len(r.hosts); i++ {
		for j := i; j > 0 && len(r.hosts[j].from) > len(r.hosts[j-1].from); j-- {
			r.hosts[j], r.hosts[j-1] = r.hosts[j-1], r.hosts[j]
		}
	}
}

func (r *redactor) mac(domain string, data []byte) []byte {
	h := hmac.New(sha256.New, r.key)
	h.Write([]byte(domain))
	h.Write([]byte{0})
	h.Write(data)
	return h.Sum(nil)
}

// addr returns the pseudonym of a.
func (r *redactor) addr(a netip.Addr) netip.Addr {
	if !a.IsValid() || keepAddr(a) {
		return a
	}
	zone, mapped := a.Zone(), a.Is4In6()
	base := a.Unmap().WithZone("")
	p, ok := r.addrs[base]
	if !ok {
		p = r.derive(base)
		r.addrs[base] = p
		r.used[p] = true
	}
	if mapped && p.Is4() {
		p = netip.AddrFrom16(p.As16())
	}
	if zone != "" && p.Is6() {
		p = p.WithZone(zone)
	}
	return p
}

func (r *redactor) derive(a netip.Addr) netip.Addr {
	raw := a.AsSlice()
	if a.Is4() {
		for probe := range maxProbes {
			sum := r.mac("ip", append(binary.BigEndian.AppendUint32(nil, uint32(probe)), raw...))
			b := pseudo4.Addr().As4()
			b[1] |= sum[0] & 1 // 198.18 or 198.19
			b[2], b[3] = sum[1], sum[2]
			if p := netip.AddrFrom4(b); !r.used[p] {
				return p
			}
		}
	}
	for probe := uint32(0); ; probe++ {
		sum := r.mac("ip6", append(binary.BigEndian.AppendUint32(nil, probe), raw...))
		b := pseudo6.Addr().As16()
		copy(b[4:], sum[:12])
		if p := netip.AddrFrom16(b); !r.used[p] {
			return p
		}
	}
}

// text redacts the host names and addresses written in s.
func (r *redactor) text(s string) string {
	s = r.textNames(s)
	for _, h := range r.hosts {
		s = replaceWord(s, h.from, h.to)
	}
	s = r.dashedHosts(s)
	return r.textAddrs(s)
}

func isWordByte(c byte) bool {
	return c == '_' || c == '-' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// replaceWord replaces old where it is not part of a longer word.
func replaceWord(s, old, new string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, old)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		end := i + len(old)
		bounded := (i == 0 || !isWordByte(s[i-1])) && (end == len(s) || !isWordByte(s[end]))
		b.WriteString(s[:i])
		if bounded {
			b.WriteString(new)
		} else {
			b.WriteString(old)
		}
		s = s[end:]
	}
}

// dashedHosts redacts EC2-style host names that spell an IPv4 address with
// dashes: ip-10-0-0-10 becomes ip-198-18-7-31.
func (r *redactor) dashedHosts(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "ip-")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		inWord := i > 0 && isWordByte(s[i-1])
		b.WriteString(s[:i+3])
		s = s[i+3:]
		if inWord {
			continue
		}
		end := 0
		for end < len(s) && (s[end] == '-' || '0' <= s[end] && s[end] <= '9') {
			end++
		}
		dashed := strings.TrimRight(s[:end], "-")
		a, err := netip.ParseAddr(strings.ReplaceAll(dashed, "-", "."))
		if err != nil || !a.Is4() {
			continue
		}
		p := r.addr(a)
		b.WriteString(strings.NewReplacer(".", "-", ":", "-").Replace(p.String()))
		s = s[len(dashed):]
	}
}

func isAddrByte(c byte) bool {
	return c == '.' || c == ':' || '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// isTokenByte: the characters of a token, the unit addresses are looked for
// in. Brackets, slashes, dashes, '%' and spaces separate tokens.
func isTokenByte(c byte) bool {
	return c == '.' || c == ':' || c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// textAddrs replaces every IPv4 or IPv6 address written in s. A candidate is
// a whole token made of address characters only, so that "2.13.0.1g" (a
// version) and hex digits inside words are left alone.
func (r *redactor) textAddrs(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		if !isTokenByte(s[i]) {
			b.WriteByte(s[i])
			i++
			continue
		}
		j := i
		candidate := true
		for j < len(s) && isTokenByte(s[j]) {
			candidate = candidate && isAddrByte(s[j])
			j++
		}
		if candidate {
			b.WriteString(r.run(s[i:j]))
		} else {
			b.WriteString(s[i:j])
		}
		i = j
	}
	return b.String()
}

// run redacts one token of address characters: an address, an address with a
// port ("10.0.0.7:443", "10.0.0.7:" before "*"), or one of those followed by
// sentence punctuation.
func (r *redactor) run(run string) string {
	if a, err := netip.ParseAddr(run); err == nil {
		return r.addr(a).String()
	}
	if ap, err := netip.ParseAddrPort(run); err == nil && ap.Addr().Is4() {
		return netip.AddrPortFrom(r.addr(ap.Addr()), ap.Port()).String()
	}
	if trimmed := strings.TrimRight(run, ".:"); trimmed != run && trimmed != "" {
		return r.run(trimmed) + run[len(trimmed):]
	}
	return run
}

var (
	addrType     = reflect.TypeFor[netip.Addr]()
	addrPortType = reflect.TypeFor[netip.AddrPort]()
	prefixType   = reflect.TypeFor[netip.Prefix]()
)

// copy returns a deep copy of v with every address and string redacted.
// Values that hold neither (bucket series) are copied as they are.
func (r *redactor) copy(v reflect.Value) reflect.Value {
	t := v.Type()
	switch t {
	case addrType:
		return reflect.ValueOf(r.addr(v.Interface().(netip.Addr)))
	case addrPortType:
		ap := v.Interface().(netip.AddrPort)
		if !ap.IsValid() {
			return v
		}
		return reflect.ValueOf(netip.AddrPortFrom(r.addr(ap.Addr()), ap.Port()))
	case prefixType:
		p := v.Interface().(netip.Prefix)
		if !p.IsValid() {
			return v
		}
		return reflect.ValueOf(netip.PrefixFrom(r.addr(p.Addr()), p.Bits()))
	}
	if r.isPlain(t) {
		if t.Kind() == reflect.Slice && !v.IsNil() {
			out := reflect.MakeSlice(t, v.Len(), v.Len())
			reflect.Copy(out, v)
			return out
		}
		return v
	}
	switch t.Kind() {
	case reflect.String:
		out := reflect.New(t).Elem()
		out.SetString(r.text(v.String()))
		return out
	case reflect.Struct:
		out := reflect.New(t).Elem()
		out.Set(v) // unexported fields (time.Time's) as they are
		for i := range t.NumField() {
			if t.Field(i).IsExported() {
				out.Field(i).Set(r.copy(v.Field(i)))
			}
		}
		return out
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && v.IsNil() {
			return v
		}
		out := reflect.New(t).Elem()
		if t.Kind() == reflect.Slice {
			out = reflect.MakeSlice(t, v.Len(), v.Len())
		}
		for i := range v.Len() {
			out.Index(i).Set(r.copy(v.Index(i)))
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeMapWithSize(t, v.Len())
		for it := v.MapRange(); it.Next(); {
			out.SetMapIndex(r.copy(it.Key()), r.copy(it.Value()))
		}
		return out
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		out := reflect.New(t.Elem())
		out.Elem().Set(r.copy(v.Elem()))
		return out
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		out := reflect.New(t).Elem()
		out.Set(r.copy(v.Elem()))
		return out
	}
	return v
}

// isPlain tells whether values of t hold no string, address, pointer, map
// or interface, so that copying them needs no walk.
func (r *redactor) isPlain(t reflect.Type) bool {
	if p, ok := r.plain[t]; ok {
		return p
	}
	r.plain[t] = false // a recursive type is not plain
	p := false
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		p = true
	case reflect.Array, reflect.Slice:
		p = r.isPlain(t.Elem())
	case reflect.Struct:
		p = t != addrType && t != addrPortType && t != prefixType
		for i := range t.NumField() {
			p = p && r.isPlain(t.Field(i).Type)
		}
	}
	r.plain[t] = p
	return p
}
