// Package imagecheck reads a no8s image back out of podman's storage
// (`podman save`, then the layers' tar files) and checks what `make image`
// promises: the binaries, the CA bundle, a numeric non-root user in
// /etc/passwd, no shell, and binaries that are static, -trimpath builds
// stamped with the expected version, built without failpoints.
package imagecheck

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/no8s/no8s/services/internal/failpoint"
)

// File is one regular file, directory or link of the image's root file
// system (the layers applied in order).
type File struct {
	Path     string
	Mode     os.FileMode
	Size     int64
	UID, GID int
	Linkname string
	// Data is set for regular files.
	Data []byte
}

// Config is the part of the image configuration the checks read.
type Config struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Config       struct {
		User       string            `json:"User"`
		Env        []string          `json:"Env"`
		Entrypoint []string          `json:"Entrypoint"`
		Cmd        []string          `json:"Cmd"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
}

// Image is an image read out of podman's storage.
type Image struct {
	Ref    string
	Config Config
	Files  map[string]*File
}

// Save exports ref with `podman save --format docker-archive` into dir and
// reads it.
func Save(ctx context.Context, ref, dir string) (*Image, error) {
	archive := filepath.Join(dir, "image.tar")
	out, err := exec.CommandContext(ctx, "podman", "save", "-q", "--format", "docker-archive", "-o", archive, ref).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("podman save %s: %w: %s", ref, err, out)
	}
	defer os.Remove(archive)
	return ReadArchive(ref, archive)
}

// ReadArchive reads a docker-archive tar file (manifest.json, the config
// and one tar per layer) of one image.
func ReadArchive(ref, archive string) (*Image, error) {
	entries := map[string][]byte{}
	if err := walkTar(archive, func(h *tar.Header, r io.Reader) error {
		if h.Typeflag != tar.TypeReg {
			return nil
		}
		b, err := io.ReadAll(r)
		if err != nil {
			return fmt.Errorf("read %s: %w", h.Name, err)
		}
		entries[path.Clean(h.Name)] = b
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read archive of %s: %w", ref, err)
	}
	var manifest []struct {
		Config string
		Layers []string
	}
	if err := json.Unmarshal(entries["manifest.json"], &manifest); err != nil {
		return nil, fmt.Errorf("%s: manifest.json: %w", ref, err)
	}
	if len(manifest) != 1 {
		return nil, fmt.Errorf("%s: manifest.json lists %d images, want 1", ref, len(manifest))
	}
	img := &Image{Ref: ref, Files: map[string]*File{}}
	if err := json.Unmarshal(entries[path.Clean(manifest[0].Config)], &img.Config); err != nil {
		return nil, fmt.Errorf("%s: config %s: %w", ref, manifest[0].Config, err)
	}
	for _, l := range manifest[0].Layers {
		layer, ok := entries[path.Clean(l)]
		if !ok {
			return nil, fmt.Errorf("%s: layer %s missing from the archive", ref, l)
		}
		if err := img.applyLayer(layer); err != nil {
			return nil, fmt.Errorf("%s: layer %s: %w", ref, l, err)
		}
	}
	return img, nil
}

func (img *Image) applyLayer(layer []byte) error {
	var r io.Reader = bytes.NewReader(layer)
	if bytes.HasPrefix(layer, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return fmt.Errorf("gunzip: %w", err)
		}
		r = zr
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("tar: %w", err)
		}
		p := "/" + strings.TrimPrefix(path.Clean("/"+h.Name), "/")
		if base := path.Base(p); strings.HasPrefix(base, ".wh.") {
			delete(img.Files, path.Join(path.Dir(p), strings.TrimPrefix(base, ".wh.")))
			continue
		}
		f := &File{Path: p, Mode: h.FileInfo().Mode(), Size: h.Size, UID: h.Uid, GID: h.Gid, Linkname: h.Linkname}
		if h.Typeflag == tar.TypeReg {
			if f.Data, err = io.ReadAll(tr); err != nil {
				return fmt.Errorf("read %s: %w", p, err)
			}
		}
		img.Files[p] = f
	}
}

func walkTar(file string, fn func(*tar.Header, io.Reader) error) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(bufio.NewReader(f))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(h, tr); err != nil {
			return err
		}
	}
}

// Listing returns one line per file, sorted by path: mode, uid:gid, size
// and path (and a link's target).
func (img *Image) Listing() string {
	paths := make([]string, 0, len(img.Files))
	for p := range img.Files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var b strings.Builder
	for _, p := range paths {
		f := img.Files[p]
		fmt.Fprintf(&b, "%s %5d:%-5d %10d %s", f.Mode, f.UID, f.GID, f.Size, p)
		if f.Linkname != "" {
			fmt.Fprintf(&b, " -> %s", f.Linkname)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// Shells are the names of files that would give a container a shell or a
// toolbox; none may be in the image.
var Shells = []string{"sh", "bash", "dash", "ash", "zsh", "busybox", "toybox"}

// CheckLayout checks the root file system and the configuration: every
// binary under /usr/local/bin (executable), the CA bundle, a numeric user
// other than 0 that /etc/passwd names, no shell, the platform.
func (img *Image) CheckLayout(arch string, binaries []string) error {
	var errs []error
	if img.Config.OS != "linux" || img.Config.Architecture != arch {
		errs = append(errs, fmt.Errorf("platform %s/%s, want linux/%s", img.Config.OS, img.Config.Architecture, arch))
	}
	for _, b := range binaries {
		f, ok := img.Files["/usr/local/bin/"+b]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("/usr/local/bin/%s missing", b))
		case !f.Mode.IsRegular() || f.Mode&0o111 == 0:
			errs = append(errs, fmt.Errorf("/usr/local/bin/%s is not an executable file (%s)", b, f.Mode))
		}
	}
	if f, ok := img.Files["/etc/ssl/certs/ca-certificates.crt"]; !ok || !bytes.Contains(f.Data, []byte("BEGIN CERTIFICATE")) {
		errs = append(errs, errors.New("no CA bundle at /etc/ssl/certs/ca-certificates.crt"))
	}
	if err := img.checkUser(); err != nil {
		errs = append(errs, err)
	}
	if err := img.checkStateDirs(); err != nil {
		errs = append(errs, err)
	}
	for p := range img.Files {
		for _, s := range Shells {
			if path.Base(p) == s {
				errs = append(errs, fmt.Errorf("%s: a shell or toolbox in the image", p))
			}
		}
	}
	return errors.Join(errs...)
}

// checkUser: the configured user is numeric uid:gid, not root, and is an
// entry of /etc/passwd.
func (img *Image) checkUser() error {
	uid, gid, _ := strings.Cut(img.Config.Config.User, ":")
	if uid == "" || strings.Trim(uid, "0123456789") != "" || strings.Trim(gid, "0123456789") != "" {
		return fmt.Errorf("user %q is not numeric uid:gid", img.Config.Config.User)
	}
	if uid == "0" {
		return errors.New("the image runs as root (user 0)")
	}
	passwd, ok := img.Files["/etc/passwd"]
	if !ok {
		return errors.New("no /etc/passwd")
	}
	for _, line := range strings.Split(string(passwd.Data), "\n") {
		fields := strings.Split(line, ":")
		if len(fields) >= 4 && fields[2] == uid && (gid == "" || fields[3] == gid) {
			return nil
		}
	}
	return fmt.Errorf("/etc/passwd has no entry for user %s", img.Config.Config.User)
}

// StateDirs are the directories the image's user must own, so that a
// named volume mounted on one starts owned by it: the CA, the issued
// credentials and the NATS include of docker-compose.yml's identity
// service.
var StateDirs = []string{"/var/lib/no8s/ca", "/var/lib/no8s/identity", "/var/lib/no8s/nats"}

// checkStateDirs: every StateDirs entry is a directory owned by the
// image's user.
func (img *Image) checkStateDirs() error {
	uid, _, _ := strings.Cut(img.Config.Config.User, ":")
	var errs []error
	for _, d := range StateDirs {
		f, ok := img.Files[d]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s missing (a named volume on it would be root's)", d))
		case !f.Mode.IsDir():
			errs = append(errs, fmt.Errorf("%s is not a directory (%s)", d, f.Mode))
		case strconv.Itoa(f.UID) != uid:
			errs = append(errs, fmt.Errorf("%s is owned by %d, not by the image's user %s", d, f.UID, uid))
		}
	}
	return errors.Join(errs...)
}

// Extract writes the image's file p into dir and returns its path there.
func (img *Image) Extract(p, dir string) (string, error) {
	f, ok := img.Files[p]
	if !ok || !f.Mode.IsRegular() {
		return "", fmt.Errorf("%s: %s is not a file of the image", img.Ref, p)
	}
	out := filepath.Join(dir, path.Base(p))
	if err := os.WriteFile(out, f.Data, 0o755); err != nil {
		return "", fmt.Errorf("extract %s: %w", p, err)
	}
	return out, nil
}

// BuildInfo is what `go version -m` prints about a binary, parsed.
type BuildInfo struct {
	GoVersion string
	Settings  map[string]string
}

// ReadBuildInfo runs `go version -m file` and parses its build settings.
func ReadBuildInfo(ctx context.Context, file string) (*BuildInfo, string, error) {
	out, err := exec.CommandContext(ctx, "go", "version", "-m", file).CombinedOutput()
	if err != nil {
		return nil, string(out), fmt.Errorf("go version -m %s: %w: %s", file, err, out)
	}
	bi := &BuildInfo{Settings: map[string]string{}}
	for i, line := range strings.Split(string(out), "\n") {
		if i == 0 {
			if _, v, ok := strings.Cut(line, ": "); ok {
				bi.GoVersion = strings.TrimSpace(v)
			}
			continue
		}
		fields := strings.SplitN(strings.TrimSpace(line), "\t", 2)
		if len(fields) == 2 && fields[0] == "build" {
			k, v, _ := strings.Cut(fields[1], "=")
			bi.Settings[k] = strings.Trim(v, `"`)
		}
	}
	return bi, string(out), nil
}

// CheckBuild checks a binary's build settings: GOOS linux, GOARCH arch,
// -trimpath, CGO_ENABLED=0 and no failpoints (CheckNoFailpoints). (With
// -trimpath Go leaves -ldflags out of the build information:
// StampedVersion reads the stamp itself.)
func (bi *BuildInfo) CheckBuild(arch string) error {
	var errs []error
	for _, k := range []string{"GOOS", "GOARCH", "-trimpath", "CGO_ENABLED"} {
		want := map[string]string{"GOOS": "linux", "GOARCH": arch, "-trimpath": "true", "CGO_ENABLED": "0"}[k]
		if bi.Settings[k] != want {
			errs = append(errs, fmt.Errorf("build setting %s=%q, want %q", k, bi.Settings[k], want))
		}
	}
	return errors.Join(append(errs, bi.CheckNoFailpoints())...)
}

// Tags returns the build tags the binary was built with (its -tags
// setting), none when it has none.
func (bi *BuildInfo) Tags() []string {
	if bi.Settings["-tags"] == "" {
		return nil
	}
	return strings.Split(bi.Settings["-tags"], ",")
}

// CheckNoFailpoints checks that the binary was built without the build
// tag failpoint: a release binary never carries failpoints.
func (bi *BuildInfo) CheckNoFailpoints() error {
	if slices.Contains(bi.Tags(), failpoint.Tag) {
		return fmt.Errorf("built with the build tag %s (-tags=%s): failpoints are for test builds only", failpoint.Tag, bi.Settings["-tags"])
	}
	return nil
}

// VersionSymbols are the string variables `make` stamps with -ldflags -X.
const (
	VersionSymbol = "github.com/no8s/no8s/services/internal/version.version"
	CommitSymbol  = "github.com/no8s/no8s/services/internal/version.commit"
)

// StampedString reads the value of a Go string variable set at link time
// out of an ELF binary of any architecture, without running it: the
// symbol's string header (pointer, length) and the bytes it points at.
func StampedString(file, symbol string) (string, error) {
	f, err := elf.Open(file)
	if err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		return "", fmt.Errorf("%s: symbols: %w", file, err)
	}
	read := func(addr, n uint64) ([]byte, error) {
		for _, sec := range f.Sections {
			if sec.Type != elf.SHT_NOBITS && addr >= sec.Addr && addr+n <= sec.Addr+sec.Size {
				b := make([]byte, n)
				if _, err := sec.ReadAt(b, int64(addr-sec.Addr)); err != nil {
					return nil, err
				}
				return b, nil
			}
		}
		return nil, fmt.Errorf("address %#x not in a section with contents", addr)
	}
	for _, s := range syms {
		if s.Name != symbol {
			continue
		}
		hdr, err := read(s.Value, 16)
		if err != nil {
			return "", fmt.Errorf("%s: %s: %w", file, symbol, err)
		}
		ptr, n := f.ByteOrder.Uint64(hdr[:8]), f.ByteOrder.Uint64(hdr[8:])
		if n == 0 {
			return "", nil
		}
		b, err := read(ptr, n)
		if err != nil {
			return "", fmt.Errorf("%s: %s: %w", file, symbol, err)
		}
		return string(b), nil
	}
	return "", fmt.Errorf("%s: no symbol %s", file, symbol)
}

// CheckStamp checks that the binary carries version and commit.
func CheckStamp(file, version, commit string) error {
	var errs []error
	for sym, want := range map[string]string{VersionSymbol: version, CommitSymbol: commit} {
		got, err := StampedString(file, sym)
		if err != nil {
			errs = append(errs, err)
		} else if got != want {
			errs = append(errs, fmt.Errorf("%s = %q, want %q", sym, got, want))
		}
	}
	return errors.Join(errs...)
}

// ELFMachines maps GOARCH names to ELF machines.
var ELFMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// CheckELF checks that file is an ELF executable for arch, statically linked
// (no PT_INTERP program header, no dynamic section).
func CheckELF(file, arch string) error {
	f, err := elf.Open(file)
	if err != nil {
		return fmt.Errorf("%s: not an ELF file: %w", file, err)
	}
	defer f.Close()
	want, ok := ELFMachines[arch]
	if !ok {
		return fmt.Errorf("no ELF machine known for %s", arch)
	}
	if f.Machine != want || f.Class != elf.ELFCLASS64 {
		return fmt.Errorf("%s: ELF machine %s class %s, want %s ELFCLASS64", file, f.Machine, f.Class, want)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			return fmt.Errorf("%s: dynamically linked (%s program header)", file, p.Type)
		}
	}
	return nil
}
