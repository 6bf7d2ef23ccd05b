package debian

import (
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// Kernel is one line of Debian's cloud kernels: the newest version of the
// suite for arch, found through the metapackage linux-image-cloud-<arch>.
type Kernel struct {
	Name  string // the matrix's name for it: 5.10, 6.1, 6.12, 6.1-arm64
	Suite string
	Arch  string
}

// Fetched is a kernel ready to boot: the image and the modules to load, in
// order, decompressed, all in the cache.
type Fetched struct {
	Kernel
	Package string // the binary package the image came from
	Version string // its Debian version (the cache key)
	Release string // uname -r
	Image   string // path of vmlinuz
	Modules []string
}

// Candidates are the line's kernel packages, newest first: for each
// version of the cloud metapackage the archive offers (security, updates,
// the point release), the image it depends on, as its -unsigned twin where
// the archive has one. A mirror that lists a version whose file it lacks
// still leaves the next.
func (k Kernel) Candidates(a *Apt) ([][2]string, error) {
	meta := "linux-image-cloud-" + k.Arch
	out, err := a.run(a.Dir, "apt-cache", "madison", meta)
	if err != nil {
		return nil, err
	}
	var cands [][2]string
	seen := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Split(line, "|")
		if len(f) < 2 {
			continue
		}
		ver := strings.TrimSpace(f[1])
		if seen[ver] {
			continue
		}
		seen[ver] = true
		show, err := a.run(a.Dir, "apt-cache", "show", meta+"="+ver)
		if err != nil {
			return nil, err
		}
		m := regexp.MustCompile(`(?m)^Depends:.*?\b(linux-image-\S+) \(= ([^)]+)\)`).FindSubmatch(show)
		if m == nil {
			continue
		}
		pkg, pver := string(m[1]), string(m[2])
		if u, err := a.Candidates([]string{pkg + "-unsigned"}); err == nil && u[pkg+"-unsigned"] != "" {
			cands = append(cands, [2]string{pkg + "-unsigned", pver})
		}
		cands = append(cands, [2]string{pkg, pver})
	}
	if len(cands) == 0 {
		return nil, fmt.Errorf("%s in %s/%s depends on no linux-image package", meta, k.Suite, k.Arch)
	}
	return cands, nil
}

// Fetch resolves, downloads and unpacks the kernel into root/kernel/, once
// per package version: later runs find it there. modules are the module
// names to load (veth, sch_ingress, cls_bpf); their dependencies from
// modules.dep come along, before them.
func (k Kernel) Fetch(root string, a *Apt, modules []string) (*Fetched, error) {
	cands, err := k.Candidates(a)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, c := range cands {
		f, err := k.fetch(root, a, c[0], c[1], modules)
		if err == nil {
			return f, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func (k Kernel) fetch(root string, a *Apt, pkg, version string, modules []string) (*Fetched, error) {
	f := &Fetched{Kernel: k, Package: pkg, Version: version}
	dir := filepath.Join(root, "kernel", pkg+"_"+version)
	manifest := filepath.Join(dir, "manifest")
	if err := f.readManifest(dir, manifest); err == nil {
		return f, nil
	}
	deb, err := a.Download(pkg, version)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(root, "unpack-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if err := Extract(deb, tmp); err != nil {
		return nil, err
	}
	images, _ := filepath.Glob(filepath.Join(tmp, "boot/vmlinuz-*"))
	if len(images) != 1 {
		return nil, fmt.Errorf("%s: want one boot/vmlinuz-*, found %d", filepath.Base(deb), len(images))
	}
	f.Release = strings.TrimPrefix(filepath.Base(images[0]), "vmlinuz-")
	modDir := filepath.Join(tmp, "lib/modules", f.Release)
	if _, err := os.Stat(modDir); err != nil {
		modDir = filepath.Join(tmp, "usr/lib/modules", f.Release)
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "modules"), 0o755); err != nil {
		return nil, err
	}
	if err := copyFile(images[0], filepath.Join(dir, "vmlinuz")); err != nil {
		return nil, err
	}
	lines, err := placeModules(modDir, filepath.Join(dir, "modules"), modules)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pkg, err)
	}
	content := "release " + f.Release + "\n" + strings.Join(lines, "\n") + "\n"
	if err := os.WriteFile(manifest, []byte(content), 0o644); err != nil {
		return nil, err
	}
	return f, f.readManifest(dir, manifest)
}

func (f *Fetched) readManifest(dir, manifest string) error {
	data, err := os.ReadFile(manifest)
	if err != nil {
		return err
	}
	f.Modules = nil
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if rel, ok := strings.CutPrefix(line, "release "); ok {
			f.Release = rel
			continue
		}
		f.Modules = append(f.Modules, filepath.Join(dir, "modules", line))
	}
	f.Image = filepath.Join(dir, "vmlinuz")
	if f.Release == "" {
		return errors.New("manifest names no release")
	}
	return nil
}

// placeModules decompresses the modules named in want, and those they
// depend on, from the package's module tree into dst, and returns their file
// names in load order, each after what it needs. The package ships no
// modules.dep (depmod writes it at install): the dependencies come from each
// module's own .modinfo.
func placeModules(modDir, dst string, want []string) ([]string, error) {
	files := map[string]string{} // module name -> path
	err := filepath.WalkDir(modDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(d.Name(), ".ko") {
			files[moduleName(p)] = p
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	var order []string
	placed := map[string]bool{}
	var place func(name string) error
	place = func(name string) error {
		if placed[name] {
			return nil
		}
		placed[name] = true
		src, ok := files[name]
		if !ok {
			if builtIn(modDir, name) {
				return nil
			}
			return fmt.Errorf("module %s is neither in the package nor built in", name)
		}
		out := filepath.Join(dst, name+".ko")
		if err := decompress(src, out); err != nil {
			return err
		}
		deps, err := modinfoDepends(out)
		if err != nil {
			return err
		}
		for _, d := range deps {
			if err := place(d); err != nil {
				return err
			}
		}
		order = append(order, name+".ko")
		return nil
	}
	for _, name := range want {
		if err := place(strings.ReplaceAll(name, "-", "_")); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// modinfoDepends reads the depends= entry of a module's .modinfo section.
func modinfoDepends(ko string) ([]string, error) {
	f, err := elf.Open(ko)
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", filepath.Base(ko), err)
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("module %s has no .modinfo", filepath.Base(ko))
	}
	data, err := sec.Data()
	if err != nil {
		return nil, err
	}
	for _, kv := range strings.Split(string(data), "\x00") {
		if v, ok := strings.CutPrefix(kv, "depends="); ok && v != "" {
			return strings.Split(v, ","), nil
		}
	}
	return nil, nil
}

func builtIn(modDir, name string) bool {
	data, err := os.ReadFile(filepath.Join(modDir, "modules.builtin"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if moduleName(line) == strings.ReplaceAll(name, "-", "_") {
			return true
		}
	}
	return false
}

// moduleName is the module's name as the kernel knows it: the file name
// without .ko and compression suffix, dashes as underscores.
func moduleName(path string) string {
	base := filepath.Base(path)
	if i := strings.Index(base, ".ko"); i >= 0 {
		base = base[:i]
	}
	return strings.ReplaceAll(base, "-", "_")
}

// decompress writes the module at src to dst uncompressed: finit_module of
// a compressed module needs a kernel built to decompress it, and the older
// ones are not.
func decompress(src, dst string) error {
	var tool string
	switch filepath.Ext(src) {
	case ".ko":
		return copyFile(src, dst)
	case ".xz":
		tool = "xz"
	case ".zst":
		tool = "zstd"
	case ".gz":
		tool = "gzip"
	default:
		return fmt.Errorf("module %s: unknown compression", src)
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	cmd := exec.Command(tool, "-dc", src)
	cmd.Stdout = out
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		out.Close()
		return fmt.Errorf("%s -dc %s: %w: %s", tool, filepath.Base(src), err, stderr.String())
	}
	return out.Close()
}

func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o644)
}
