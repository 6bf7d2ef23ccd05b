package ena

import (
	"fmt"
	"os"

	"github.com/enaprobe/enaprobe/internal/ena/counters"
)

// FileSource reads statistics from a file in `ethtool -S` format, read anew
// at every Read: a lab, an emulator or a replay rewrites the file and the
// sampler sees the new values. Write the file by renaming a complete one into
// place, or a read may see it half written.
type FileSource struct {
	path string
}

// NewFileSource returns a source reading path. The file need not exist yet:
// reads fail until it does.
func NewFileSource(path string) *FileSource { return &FileSource{path: path} }

// Path is the file the source reads.
func (f *FileSource) Path() string { return f.path }

// Kind is "file".
func (f *FileSource) Kind() string { return "file" }

// Read opens and parses the file.
func (f *FileSource) Read() (map[string]uint64, error) {
	file, err := os.Open(f.path)
	if err != nil {
		return nil, fmt.Errorf("read counter file: %w", err)
	}
	defer file.Close()
	values, err := counters.ParseEthtoolS(file)
	if err != nil {
		return nil, fmt.Errorf("read counter file %s: %w", f.path, err)
	}
	return values, nil
}
