//go:build linux

package owner

import "testing"

func TestCommonPath(t *testing.T) {
	cases := []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{"/a/b/c"}, "/a/b/c"},
		{[]string{"/kubepods.slice/pod1.slice/cri-containerd-a.scope", "/kubepods.slice/pod1.slice/cri-containerd-b.scope"}, "/kubepods.slice/pod1.slice"},
		{[]string{"/a/b", "/c/d"}, "/"},
	}
	for _, c := range cases {
		if got := commonPath(c.in); got != c.want {
			t.Errorf("commonPath(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
