package keyring

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// FileID is the id of the key Herald makes for a key file.
const FileID = "k1"

// fileHeader opens a key file Herald made, saying what it is for.
const fileHeader = "# Herald's key for the endpoint secrets in the database beside this file.\n" +
	"# Back it up with the database, but keep it apart from copies of the database:\n" +
	"# without it the secrets cannot be read, and with it anyone holding a copy can read them.\n"

// ReadFile reads a key file: a ring in the form Parse takes, one key a line
// or separated by commas; lines starting with # are comments.
func ReadFile(path string) (*Ring, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			lines = append(lines, l)
		}
	}
	r, err := Parse(strings.Join(lines, "\n"))
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	return r, nil
}

// CreateFile makes a key file at path holding one new key (FileID), with
// mode 0600. It is made whole or not at all (written beside, synced, then
// linked into place) and never replaces a file already there: if one is,
// it gives an error for which errors.Is(err, fs.ErrExist) holds.
func CreateFile(path string) (*Ring, error) {
	entry, err := Generate(FileID)
	if err != nil {
		return nil, err
	}
	r, err := Parse(entry)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".new-*")
	if err != nil {
		return nil, fmt.Errorf("make key file %s: %w", path, err)
	}
	tmpName := tmp.Name()
	defer os.Remove(tmpName) // once linked, the key stays under path
	err = tmp.Chmod(0o600)
	if err == nil {
		_, err = tmp.WriteString(fileHeader + entry + "\n")
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("make key file %s: %w", path, err)
	}
	// A link fails when path exists, so a file already there, made by a
	// process starting at the same time, say, is never replaced.
	if err := os.Link(tmpName, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("make key file %s: %w", path, fs.ErrExist)
		}
		return nil, fmt.Errorf("make key file %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // the new name survives a crash
		d.Close()
	}
	return r, nil
}

// LoadOrCreateFile reads the key file at path, or makes it (CreateFile)
// when there is none; created says which. A file made meanwhile by another
// process is read, not replaced.
func LoadOrCreateFile(path string) (r *Ring, created bool, err error) {
	r, err = ReadFile(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return r, false, err
	}
	r, err = CreateFile(path)
	if errors.Is(err, fs.ErrExist) {
		r, err = ReadFile(path)
		return r, false, err
	}
	return r, err == nil, err
}
