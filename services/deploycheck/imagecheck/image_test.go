//go:build deploycheck

package imagecheck

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// TestImage checks the images `make image` built (make image-check passes
// their names and the expected version in the environment): the files are
// listed; every binary of the build host's platform, taken out of the image,
// answers --version with the commit; every binary of the other platforms is
// an ELF of that platform whose build information shows the same version,
// -trimpath and CGO_ENABLED=0.
func TestImage(t *testing.T) {
	env := map[string]string{}
	for _, k := range []string{"NO8S_IMAGE", "NO8S_IMAGE_VERSION", "NO8S_IMAGE_COMMIT", "NO8S_IMAGE_BINARIES", "NO8S_IMAGE_PLATFORMS"} {
		if env[k] = os.Getenv(k); env[k] == "" {
			t.Fatalf("%s is not set: run make image-check", k)
		}
	}
	version, commit := env["NO8S_IMAGE_VERSION"], env["NO8S_IMAGE_COMMIT"]
	binaries := strings.Fields(env["NO8S_IMAGE_BINARIES"])
	for _, arch := range strings.Fields(env["NO8S_IMAGE_PLATFORMS"]) {
		t.Run(arch, func(t *testing.T) {
			ref := env["NO8S_IMAGE"] + ":" + version + "-" + arch
			img, err := Save(t.Context(), ref, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s (user %s, labels %v), its files:\n%s", ref, img.Config.Config.User, img.Config.Config.Labels, img.Listing())
			if err := img.CheckLayout(arch, binaries); err != nil {
				t.Fatalf("%s: %v", ref, err)
			}
			if got := img.Config.Config.Labels["org.opencontainers.image.revision"]; got != commit {
				t.Errorf("%s: label org.opencontainers.image.revision %q, want %q", ref, got, commit)
			}
			dir := t.TempDir()
			for _, b := range binaries {
				file, err := img.Extract("/usr/local/bin/"+b, dir)
				if err != nil {
					t.Fatal(err)
				}
				if err := CheckELF(file, arch); err != nil {
					t.Errorf("%s: %v", b, err)
				}
				bi, out, err := ReadBuildInfo(t.Context(), file)
				if err != nil {
					t.Fatal(err)
				}
				if err := bi.CheckBuild(arch); err != nil {
					t.Errorf("%s: %v\ngo version -m:\n%s", b, err, out)
				}
				if err := CheckStamp(file, version, commit); err != nil {
					t.Errorf("%s: %v", b, err)
				}
				if arch != runtime.GOARCH {
					v, _ := StampedString(file, VersionSymbol)
					t.Logf("%s/%s: ELF %s, %s, -trimpath=%s CGO_ENABLED=%s GOARCH=%s, stamped version %s", arch, b, ELFMachines[arch], bi.GoVersion, bi.Settings["-trimpath"], bi.Settings["CGO_ENABLED"], bi.Settings["GOARCH"], v)
					continue
				}
				v, err := exec.CommandContext(t.Context(), file, "--version").CombinedOutput()
				if err != nil {
					t.Errorf("%s --version: %v: %s", b, err, v)
					continue
				}
				line := strings.TrimSpace(string(v))
				t.Logf("%s/%s --version: %s", arch, b, line)
				if !strings.Contains(line, commit) || !strings.Contains(line, version) {
					t.Errorf("%s --version = %q, want version %s and commit %s", b, line, version, commit)
				}
			}
		})
	}
}
