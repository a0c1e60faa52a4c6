package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The TypeScript client, pinned.
const (
	tsSDKPkg     = "@modelcontextprotocol/sdk"
	tsSDKVersion = "1.32.2"
)

// tsDriver is the Node.js program that drives a server with the TypeScript
// SDK; its header comment tells its protocol with this harness.
//
//go:embed ts/driver.mjs
var tsDriver []byte

// installTSDriver installs the pinned TypeScript SDK into the user's cache
// directory unless it is there already, writes the driver next to it (Node
// resolves the SDK from the script's own folder) and returns its path. The
// file is named by its content, so that harnesses of other versions
// sharing the cache do not overwrite each other's driver.
func installTSDriver(npm string) (string, error) {
	dir := "typescript-sdk-" + tsSDKVersion
	sdk, err := npmInstall(npm, dir, tsSDKPkg, tsSDKVersion, "package.json")
	if err != nil {
		return "", err
	}
	root := filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(sdk)))) // above node_modules/@modelcontextprotocol/sdk/package.json
	path := filepath.Join(root, fmt.Sprintf("driver-%.6x.mjs", sha256.Sum256(tsDriver)))
	if b, err := os.ReadFile(path); err == nil && string(b) == string(tsDriver) {
		return path, nil
	}
	tmp, err := os.CreateTemp(root, "driver-*.tmp")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(tsDriver); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	return path, os.Rename(tmp.Name(), path)
}

// tsConfig is the driver's command-line argument.
type tsConfig struct {
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env,omitempty"`
	Tools   string            `json:"tools"` // "fleetstate" or "peer"
	Dir     string            `json:"dir,omitempty"`
	Session bool              `json:"session"`
}

// tsRequest is one line to the driver: measure this case.
type tsRequest struct {
	Size       int   `json:"size"`
	Inflight   int   `json:"inflight"`
	Overwrite  bool  `json:"overwrite"`
	DurationMs int64 `json:"durationMs"`
}

// tsReply is one line from the driver: ready, a measurement, or an error.
type tsReply struct {
	result
	Ready   bool    `json:"ready"`
	Ops     int     `json:"ops"`
	Seconds float64 `json:"seconds"`
	Error   string  `json:"error"`
}

// tsRunner drives one server through a driver process, which holds the
// TypeScript client and the server it started.
type tsRunner struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startTS(ctx context.Context, node, driver string, s serverSpec) (runner, error) {
	cfg := tsConfig{Command: s.cmd[0], Args: s.cmd[1:], Tools: "fleetstate", Dir: s.dir, Session: s.session}
	if s.peerTools {
		cfg.Tools = "peer"
	}
	for _, kv := range s.env {
		k, v, _ := strings.Cut(kv, "=")
		if cfg.Env == nil {
			cfg.Env = map[string]string{}
		}
		cfg.Env[k] = v
	}
	arg, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(node, driver, string(arg))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	out := bufio.NewScanner(stdout)
	out.Buffer(nil, 1<<20)
	r := &tsRunner{cmd: cmd, in: in, out: out}
	rep, err := r.reply()
	if err == nil && !rep.Ready {
		err = errors.New("the driver did not say it was ready")
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// reply reads the driver's next line.
func (r *tsRunner) reply() (tsReply, error) {
	if !r.out.Scan() {
		if err := r.out.Err(); err != nil {
			return tsReply{}, fmt.Errorf("TypeScript driver: %w", err)
		}
		return tsReply{}, errors.New("TypeScript driver: exited without a reply (its errors are above)")
	}
	var rep tsReply
	if err := json.Unmarshal(r.out.Bytes(), &rep); err != nil {
		return tsReply{}, fmt.Errorf("TypeScript driver: reply %.200q: %w", r.out.Bytes(), err)
	}
	if rep.Error != "" {
		return tsReply{}, fmt.Errorf("TypeScript client: %s", rep.Error)
	}
	return rep, nil
}

func (r *tsRunner) measure(ctx context.Context, size, inflight int, overwrite bool, d time.Duration) (result, error) {
	req, err := json.Marshal(tsRequest{Size: size, Inflight: inflight, Overwrite: overwrite, DurationMs: d.Milliseconds()})
	if err != nil {
		return result{}, err
	}
	if _, err := r.in.Write(append(req, '\n')); err != nil {
		return result{}, fmt.Errorf("TypeScript driver: %w", err)
	}
	rep, err := r.reply()
	if err != nil {
		return result{}, err
	}
	if rep.Ops <= 0 || rep.Seconds <= 0 {
		return result{}, fmt.Errorf("TypeScript driver: no operation in %.2f s", rep.Seconds)
	}
	return rep.result, nil
}

// Close ends the driver by closing its input; the driver closes its client,
// which ends the server. A driver that does not exit within five seconds
// is killed.
func (r *tsRunner) Close() error {
	r.in.Close()
	done := make(chan error, 1)
	go func() { done <- r.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		r.cmd.Process.Kill()
		return <-done
	}
}
