package manifest

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Extensions are the file name endings Read takes from a folder.
var extensions = []string{".yaml", ".yml", ".json"}

// Read decodes the documents of every path: a file, a folder (its .yaml,
// .yml and .json files in name order; with recursive, those of its
// subfolders too) or "-" for stdin. Every bad document is reported, by file,
// document and line, before anything is returned.
func Read(paths []string, stdin io.Reader, recursive bool) ([]Document, error) {
	if len(paths) == 0 {
		return nil, errors.New("no file given: -f FILE, -f FOLDER or -f - (standard input)")
	}
	var (
		docs []Document
		errs []error
	)
	for _, p := range paths {
		files, err := expand(p, recursive)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, f := range files {
			var data []byte
			if f == "-" {
				data, err = io.ReadAll(stdin)
			} else {
				data, err = os.ReadFile(f)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("read %s: %w", f, err))
				continue
			}
			d, err := Parse(f, data)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			docs = append(docs, d...)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("no documents in %s", strings.Join(paths, ", "))
	}
	return docs, nil
}

// expand lists the files a path names.
func expand(p string, recursive bool) ([]string, error) {
	if p == "-" {
		return []string{"-"}, nil
	}
	info, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	if !info.IsDir() {
		return []string{p}, nil
	}
	var files []string
	err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != p && !recursive {
				return filepath.SkipDir
			}
			return nil
		}
		if slices.Contains(extensions, strings.ToLower(filepath.Ext(path))) {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read folder %s: %w", p, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("folder %s holds no .yaml, .yml or .json file", p)
	}
	return files, nil
}
