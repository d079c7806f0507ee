package imagecheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestStampedString builds a small program for another architecture with
// a -X stamp and reads the stamp back out of the ELF file, as the image
// check does for the arm64 binaries it cannot run.
func TestStampedString(t *testing.T) {
	dir := t.TempDir()
	src := "package main\n\nvar version string\n\nfunc main() { println(version) }\n"
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module stamp\n\ngo 1.26.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "stamp")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-trimpath", "-ldflags", "-X main.version=v1.2.3-abc", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, out)
	}
	if err := CheckELF(bin, "arm64"); err != nil {
		t.Fatal(err)
	}
	if err := CheckELF(bin, "amd64"); err == nil {
		t.Fatal("an arm64 binary passed as amd64")
	}
	got, err := StampedString(bin, "main.version")
	if err != nil || got != "v1.2.3-abc" {
		t.Fatalf("StampedString = %q, %v; want v1.2.3-abc", got, err)
	}
	bi, _, err := ReadBuildInfo(t.Context(), bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := bi.CheckBuild("arm64"); err != nil {
		t.Fatal(err)
	}
	if _, err := StampedString(bin, "main.nothing"); err == nil {
		t.Fatal("a missing symbol read")
	}
}
