package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/no8s/no8s/services/internal/testenv"
)

// readmeExceptions are the README.md commands that TestReadmeCommands does
// not run as a command that ends: each with the reason. Every other command
// of every sh block runs, in order; an entry that matches no command fails
// the test, so that the list cannot outlive the README.
var readmeExceptions = []readmeException{
	{command: "make run", how: readmeSkip,
		reason: "the same no8s dev as the `make run ARGS=…` line that spells out every address, which the test runs instead, on free ports"},
	{command: "make test", how: readmeSkip,
		reason: "every module's tests, this one among them: this test is part of it"},
	{command: "make run ARGS=", prefix: true, how: readmeDev,
		reason: "runs until Ctrl-C: started in the background, its ports substituted and --data-dir and --ready-file (a temporary directory) added to ARGS; the test waits until it is ready and checks that it listens on every substituted address"},
	{command: "no8s-reconciler noop ", prefix: true, how: readmeBackground,
		reason: "runs until Ctrl-C: started in the background; the test waits until it has printed what its comment says"},
	{command: "no8s get DatabaseCluster -w", how: readmeBackground,
		reason: "runs until Ctrl-C: started in the background; the test waits until it has printed what its comment says"},
}

// readmeException is one entry of readmeExceptions.
type readmeException struct {
	// command is the command's text (without its comment), or with prefix
	// its beginning.
	command string
	prefix  bool
	how     readmeHow
	reason  string
}

func (e readmeException) matches(c readmeCommand) bool {
	if e.prefix {
		return strings.HasPrefix(c.text, e.command)
	}
	return c.text == e.command
}

// readmeHow is what TestReadmeCommands does with an excepted command.
type readmeHow int

const (
	// readmeSkip: not run.
	readmeSkip readmeHow = iota + 1
	// readmeBackground: started, left running until the test ends.
	readmeBackground
	// readmeDev: `make run ARGS=…`, started on the test's own data
	// directory and waited for.
	readmeDev
)

// TestReadmeCommands runs every command of every sh block of README.md, as
// the README has it at test time, in order, in one sequence of shells that
// keeps their variables (as a reader's terminal does): on free ports
// substituted for the defaults (no8s dev's --listen, --nats-port,
// --store-addr, --admission-addr and --worker-listen), with a temporary
// HOME, bin/ taken off PATH (the README puts it there), from the
// checkout's root. It checks each exit code (0 unless the comment says
// "exit code N") and what each command's comment says it prints
// ("# prints: A … B": the words in that order, any spacing, … for anything).
func TestReadmeCommands(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := readmeCommands(string(readme))
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	if len(cmds) < 20 {
		t.Fatalf("README.md: only %d commands in its sh blocks", len(cmds))
	}
	used := make([]int, len(readmeExceptions))
	for i := range cmds {
		c := &cmds[i]
		for j, e := range readmeExceptions {
			if e.matches(*c) {
				if c.except != nil {
					t.Fatalf("README.md:%d: %q matches two exceptions", c.line, c.text)
				}
				c.except = &readmeExceptions[j]
				used[j]++
			}
		}
		if c.except != nil && c.except.how == readmeSkip {
			continue // its comment is prose, not checked
		}
		if c.expect, err = parseReadmeExpect(c.comment); err != nil {
			t.Errorf("README.md:%d: %q: %v", c.line, c.text, err)
		}
	}
	for j, n := range used {
		if n == 0 {
			t.Errorf("readmeExceptions[%d] (%q) matches no command of README.md", j, readmeExceptions[j].command)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	ports := newReadmePorts(t)
	r := newReadmeShell(t, root)
	for _, c := range cmds {
		text, err := ports.substitute(c.text)
		if err != nil {
			t.Fatalf("README.md:%d: %v", c.line, err)
		}
		if c.except != nil {
			switch c.except.how {
			case readmeSkip:
				t.Logf("README.md:%d: not run: %s (%s)", c.line, c.text, c.except.reason)
				continue
			case readmeDev:
				r.startDev(c, text, ports)
				continue
			case readmeBackground:
				r.startBackground(c, r.devCA(c, text))
				continue
			}
		}
		r.run(c, r.devCA(c, text))
	}
	r.stopBackground()
}

// readmeDataDir is `make run`'s data directory, as the README names files
// in it: its administrator's token, its CA for a reconciler's
// --identity-ca, its NATS users for the nats CLI's --creds. (The directory
// itself, which the README removes to start afresh, is not substituted.)
const readmeDataDir = "~/.cache/no8s/dev/"

// devCA puts the data directory of the no8s dev the test runs (its own)
// in place of readmeDataDir.
func (r *readmeShell) devCA(c readmeCommand, text string) string {
	if !strings.Contains(text, readmeDataDir) {
		return text
	}
	if r.dataDir == "" {
		r.t.Fatalf("README.md:%d: %s names no8s dev's data directory before no8s dev runs", c.line, text)
	}
	return strings.ReplaceAll(text, readmeDataDir, r.dataDir+"/")
}

// readmeCommand is one command of an sh block of README.md.
type readmeCommand struct {
	line    int    // its first line's number
	text    string // as written, without its comment; may span lines
	comment string // the comment on its last line, "" without one
	except  *readmeException
	expect  readmeExpect
}

// readmeCommands returns the commands of the sh blocks of a Markdown text
// in order: a command ends at the end of a line outside quotes and not
// continued by a backslash; a line of its own that starts with # is prose
// and belongs to no command.
func readmeCommands(md string) ([]readmeCommand, error) {
	var (
		cmds    []readmeCommand
		inBlock bool
		cur     *readmeCommand
		quote   rune
	)
	for i, line := range strings.Split(md, "\n") {
		n := i + 1
		trimmed := strings.TrimSpace(line)
		if !inBlock {
			switch trimmed {
			case "```sh":
				inBlock = true
			case "```bash", "```shell", "```console", "```zsh", "```shell-session":
				return nil, fmt.Errorf("line %d: a %s block: write shell commands in sh blocks, which the README's test runs", n, strings.TrimPrefix(trimmed, "```"))
			}
			continue
		}
		if trimmed == "```" {
			if cur != nil {
				return nil, fmt.Errorf("line %d: the sh block ends inside the command of line %d", n, cur.line)
			}
			inBlock = false
			continue
		}
		if cur == nil {
			if trimmed == "" || strings.HasPrefix(trimmed, "#") {
				continue
			}
			cur = &readmeCommand{line: n}
		} else {
			cur.text += "\n"
		}
		code, comment, continued := scanShellLine(line, &quote)
		cur.text += code
		if quote != 0 || continued {
			continue
		}
		cur.text = strings.TrimSpace(cur.text)
		cur.comment = comment
		cmds = append(cmds, *cur)
		cur = nil
	}
	if inBlock {
		return nil, errors.New("an sh block is not closed")
	}
	return cmds, nil
}

// scanShellLine splits one line of a shell command into its code and its
// comment (an unquoted # at the start of a word), given the quote open at
// its start (updated to the one open at its end), and says whether a
// backslash continues the command on the next line.
func scanShellLine(line string, quote *rune) (code, comment string, continued bool) {
	escaped := false
	for i, c := range line {
		switch {
		case escaped:
			escaped = false
		case *quote == '\'':
			if c == '\'' {
				*quote = 0
			}
		case c == '\\':
			escaped = true
		case *quote == '"':
			if c == '"' {
				*quote = 0
			}
		case c == '\'' || c == '"':
			*quote = c
		case c == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return strings.TrimRight(line[:i], " \t"), strings.TrimSpace(line[i+1:]), false
		}
	}
	if escaped && *quote == 0 {
		return line, "", true
	}
	return line, "", false
}

// readmeExpect is what a command's comment says: its exit code and what it
// prints.
type readmeExpect struct {
	exit   int
	prints string // "" for no check
}

// parseReadmeExpect reads a command's comment: clauses separated by "; ",
// each "exit code N" or "prints: A … B". Anything else is refused: a
// remark goes on a line of its own above the command.
func parseReadmeExpect(comment string) (readmeExpect, error) {
	var e readmeExpect
	if comment == "" {
		return e, nil
	}
	for _, clause := range strings.Split(comment, "; ") {
		switch {
		case strings.HasPrefix(clause, "prints: "):
			e.prints = strings.TrimSpace(strings.TrimPrefix(clause, "prints: "))
		case strings.HasPrefix(clause, "exit code "):
			n, err := strconv.Atoi(strings.TrimPrefix(clause, "exit code "))
			if err != nil {
				return e, fmt.Errorf("comment %q: exit code: %w", comment, err)
			}
			e.exit = n
		default:
			return e, fmt.Errorf(`comment %q: a command's comment is "exit code N" or "prints: …" (clauses separated by "; "); put a remark on a line of its own above it`, comment)
		}
	}
	return e, nil
}

// readmePattern is the regular expression of a "prints:" text: its words
// in order, separated by any white space, and anything where it has "…".
func readmePattern(p string) *regexp.Regexp {
	var parts []string
	for _, piece := range strings.Split(p, "…") {
		words := strings.Fields(piece)
		for i, w := range words {
			words[i] = regexp.QuoteMeta(w)
		}
		parts = append(parts, strings.Join(words, `\s+`))
	}
	return regexp.MustCompile(`(?s)` + strings.Join(parts, `.*?`))
}

// readmePorts are the free addresses the test gives no8s dev in place of
// the defaults the README names.
type readmePorts struct {
	api, nats, store, admission, worker string
	replacer                            *strings.Replacer
}

// readmeDefaultAddr finds a default address of no8s dev left in a command
// after substitution: a form the substitution does not know.
var readmeDefaultAddr = regexp.MustCompile(`(:|--nats-port[ =])(8000|4333|7001|7002|7003)\b`)

func newReadmePorts(t *testing.T) readmePorts {
	p := readmePorts{api: freeAddr(t), nats: freeAddr(t), store: freeAddr(t), admission: freeAddr(t), worker: freeAddr(t)}
	_, natsPort, err := net.SplitHostPort(p.nats)
	if err != nil {
		t.Fatal(err)
	}
	p.replacer = strings.NewReplacer(
		"localhost:8000", p.api, "127.0.0.1:8000", p.api,
		"127.0.0.1:4333", p.nats, "--nats-port 4333", "--nats-port "+natsPort,
		"127.0.0.1:7001", p.store, "127.0.0.1:7002", p.admission, "127.0.0.1:7003", p.worker)
	return p
}

// substitute puts the test's addresses in place of the defaults in a
// command, and refuses one that still names a default.
func (p readmePorts) substitute(cmd string) (string, error) {
	out := p.replacer.Replace(cmd)
	if m := readmeDefaultAddr.FindString(out); m != "" {
		return "", fmt.Errorf("%q names a default address of no8s dev (%s) in a form the test does not substitute", cmd, m)
	}
	return out, nil
}

// readmeShell runs README commands as a reader's shell would, one sh -c
// per command, carrying the variables of one into the next.
type readmeShell struct {
	t     *testing.T
	root  string
	env   []string
	state string // the shell variables after the last command (export -p)
	bg    []*readmeBackgroundProc
	// dataDir is the data directory of the no8s dev started (startDev).
	dataDir string
}

func newReadmeShell(t *testing.T, root string) *readmeShell {
	home := t.TempDir()
	bin := filepath.Join(root, "bin")
	goEnv := map[string]string{}
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOENV"} {
		// The temporary HOME would move Go's caches: keep the real ones.
		out, err := exec.Command("go", "env", k).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", k, err)
		}
		goEnv[k] = strings.TrimSpace(string(out))
	}
	env := slices.DeleteFunc(noPostgreSQL(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		_, isGo := goEnv[k]
		return isGo || strings.HasPrefix(k, "NO8S_") || strings.HasPrefix(k, "MAKE") || k == "MFLAGS" ||
			k == "NATS_URL" || k == "HOME" || k == "PATH"
	})
	// bin/ off PATH: the README's own export puts it there.
	path := slices.DeleteFunc(filepath.SplitList(os.Getenv("PATH")), func(dir string) bool {
		return filepath.Clean(dir) == bin
	})
	env = append(env, "HOME="+home, "PATH="+strings.Join(path, string(os.PathListSeparator)))
	for k, v := range goEnv {
		env = append(env, k+"="+v)
	}
	state := filepath.Join(t.TempDir(), "state.sh")
	if err := os.WriteFile(state, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := &readmeShell{t: t, root: root, env: append(env, "NO8S_README_STATE="+state), state: state}
	t.Cleanup(r.stopBackground)
	return r
}

// script is the sh script that runs cmd after the previous commands'
// variables; with save, it writes the variables after cmd for the next.
func (r *readmeShell) script(cmd string, save bool) string {
	s := "set -a\n. \"$NO8S_README_STATE\"\n" + cmd + "\n"
	if save {
		s += "__rc=$?\nexport -p > \"$NO8S_README_STATE.next\"\nexit $__rc\n"
	}
	return s
}

func (r *readmeShell) command(ctx context.Context, script string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.Dir = r.root
	cmd.Env = r.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	return cmd
}

// run runs one command to its end and checks its exit code and output.
func (r *readmeShell) run(c readmeCommand, text string) {
	t := r.t
	t.Helper()
	// Generous: make build and make natscli compile when bin/ is stale.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := r.command(ctx, r.script(text, true))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("README.md:%d: %s: %v", c.line, text, err)
	}
	out := stdout.String() + "\n" + stderr.String()
	if code != c.expect.exit {
		t.Fatalf("README.md:%d: %s\nexit code %d, the README says %d; output:\n%s", c.line, text, code, c.expect.exit, out)
	}
	if c.expect.prints != "" && !readmePattern(c.expect.prints).MatchString(out) {
		t.Fatalf("README.md:%d: %s\ndoes not print %q; output:\n%s", c.line, text, c.expect.prints, out)
	}
	if err := os.Rename(r.state+".next", r.state); err != nil {
		t.Fatalf("README.md:%d: the shell's variables after %s: %v", c.line, text, err)
	}
	t.Logf("README.md:%d: ran (exit %d, %s): %s", c.line, code, time.Since(start).Round(time.Millisecond), firstLine(text))
}

func firstLine(s string) string {
	if first, _, ok := strings.Cut(s, "\n"); ok {
		return first + " …"
	}
	return s
}

// readmeBackgroundProc is a README command that runs until Ctrl-C.
type readmeBackgroundProc struct {
	line int
	text string
	cmd  *exec.Cmd
	out  *testenv.LogBuffer
	done chan struct{}
	err  error
}

// start starts text in the background (with the variables so far).
func (r *readmeShell) start(c readmeCommand, text string) *readmeBackgroundProc {
	t := r.t
	t.Helper()
	p := &readmeBackgroundProc{line: c.line, text: text, out: &testenv.LogBuffer{}, done: make(chan struct{})}
	p.cmd = r.command(context.WithoutCancel(t.Context()), r.script(text, false))
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("README.md:%d: start %s: %v", c.line, text, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	r.bg = append(r.bg, p)
	return p
}

// startBackground starts a command that runs until Ctrl-C and waits until
// it has printed what its comment says.
func (r *readmeShell) startBackground(c readmeCommand, text string) {
	t := r.t
	t.Helper()
	p := r.start(c, text)
	if c.expect.exit != 0 {
		t.Fatalf("README.md:%d: a command that runs until Ctrl-C has no exit code", c.line)
	}
	if c.expect.prints == "" {
		t.Fatalf("README.md:%d: %s runs until Ctrl-C: its comment must say what it prints once it is going", c.line, text)
	}
	re := readmePattern(c.expect.prints)
	waitFor(t, 2*time.Minute, fmt.Sprintf("README.md:%d: %s to print %q", c.line, text, c.expect.prints), func() error {
		if re.MatchString(p.out.String()) {
			return nil
		}
		select {
		case <-p.done:
			t.Fatalf("README.md:%d: %s exited (%v) before printing %q; output:\n%s", c.line, text, p.err, c.expect.prints, p.out)
		default:
		}
		return errors.New("not yet")
	})
	t.Logf("README.md:%d: running in the background: %s", c.line, text)
}

// startDev runs `make run ARGS="…"` with a data directory and a ready
// file of the test's added to ARGS, waits until no8s dev is ready and
// checks that it listens on the test's addresses, every one of them.
func (r *readmeShell) startDev(c readmeCommand, text string, ports readmePorts) {
	t := r.t
	t.Helper()
	open := strings.Index(text, `ARGS="`)
	end := strings.LastIndex(text, `"`)
	if open < 0 || end <= open+len(`ARGS="`) {
		t.Fatalf("README.md:%d: %s: no ARGS=\"…\" to add the test's data directory to", c.line, text)
	}
	dir := t.TempDir()
	data, ready := filepath.Join(dir, "data"), filepath.Join(dir, "ready.json")
	text = text[:end] + " --data-dir " + data + " --ready-file " + ready + text[end:]
	p := r.start(c, text)
	var addrs struct {
		APIURL        string `json:"api_url"`
		NATSURL       string `json:"nats_url"`
		StoreAddr     string `json:"store_addr"`
		WorkerAddr    string `json:"worker_addr"`
		AdmissionAddr string `json:"admission_addr"`
		CADir         string `json:"ca_dir"`
	}
	// make run builds bin/no8s first: minutes when nothing is cached.
	waitFor(t, 5*time.Minute, fmt.Sprintf("README.md:%d: %s ready", c.line, text), func() error {
		select {
		case <-p.done:
			t.Fatalf("README.md:%d: %s exited: %v; output:\n%s", c.line, text, p.err, p.out)
		default:
		}
		b, err := os.ReadFile(ready)
		if err != nil {
			return err
		}
		return json.Unmarshal(b, &addrs)
	})
	want := map[string][2]string{
		"API (--listen)":               {addrs.APIURL, "http://" + ports.api},
		"NATS (--nats-port)":           {addrs.NATSURL, "nats://" + ports.nats},
		"store (--store-addr)":         {addrs.StoreAddr, ports.store},
		"admission (--admission-addr)": {addrs.AdmissionAddr, ports.admission},
		"worker (--worker-listen)":     {addrs.WorkerAddr, ports.worker},
	}
	for what, got := range want {
		if got[0] != got[1] {
			t.Errorf("README.md:%d: no8s dev's %s is %s, not the substituted %s: the README's make run ARGS do not set it", c.line, what, got[0], got[1])
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	r.dataDir = data
	t.Logf("README.md:%d: running in the background: %s", c.line, text)
}

// stopBackground ends the background commands as Ctrl-C would, the last
// started first.
func (r *readmeShell) stopBackground() {
	for i := len(r.bg) - 1; i >= 0; i-- {
		p := r.bg[i]
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGINT)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
		if r.t.Failed() {
			out := p.out.String()
			if len(out) > 8000 {
				out = out[len(out)-8000:]
			}
			r.t.Logf("---- README.md:%d: %s (tail) ----\n%s", p.line, p.text, out)
		}
	}
	r.bg = nil
}

// TestHelloReconcilerReadmeReplaces: the replace directives that
// examples/hello-reconciler/README.md shows are the ones its go.mod has,
// no more and no fewer.
func TestHelloReconcilerReadmeReplaces(t *testing.T) {
	dir := filepath.Join("..", "..", "examples", "hello-reconciler")
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	shown, have := goModReplaces(strings.Join(markdownCodeBlocks(string(readme)), "\n")), goModReplaces(string(gomod))
	if len(have) == 0 {
		t.Fatal("examples/hello-reconciler/go.mod has no replace directive")
	}
	for _, r := range have {
		if !slices.Contains(shown, r) {
			t.Errorf("go.mod has %q, README.md does not show it", r)
		}
	}
	for _, r := range shown {
		if !slices.Contains(have, r) {
			t.Errorf("README.md shows %q, go.mod does not have it", r)
		}
	}
}

// markdownCodeBlocks returns the contents of the fenced code blocks of a
// Markdown text.
func markdownCodeBlocks(md string) []string {
	var blocks []string
	var cur []string
	in := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			if in {
				blocks = append(blocks, strings.Join(cur, "\n"))
				cur = nil
			}
			in = !in
			continue
		}
		if in {
			cur = append(cur, line)
		}
	}
	return blocks
}

// goModReplaces returns the replace directives of go.mod text, each as
// "old => new" with its spacing normalised, sorted.
func goModReplaces(text string) []string {
	var out []string
	block := false
	for _, line := range strings.Split(text, "\n") {
		line, _, _ = strings.Cut(line, "//")
		line = strings.Join(strings.Fields(line), " ")
		switch {
		case block && line == ")":
			block = false
		case block && line != "":
			out = append(out, line)
		case line == "replace (":
			block = true
		case strings.HasPrefix(line, "replace "):
			out = append(out, strings.TrimPrefix(line, "replace "))
		}
	}
	slices.Sort(out)
	return out
}
