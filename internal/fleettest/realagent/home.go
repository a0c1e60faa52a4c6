package realagent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// CodexKeyEnv is the environment variable that [CodexHome]'s provider
// reads its API key from, and CodexKey the key [CodexHome] sets it to.
const (
	CodexKeyEnv = "SCRIPTED_KEY"
	CodexKey    = "sk-test-codex-scripted-0000"
)

// CodexProvider is the name of the model provider [CodexHome] configures.
const CodexProvider = "scripted"

// CodexModel is the model [CodexHome] configures, the default of Codex
// 0.169.0, and codexMigration the model Codex offers to move it to on
// its first start ("Meet GPT-6 Sol"), an offer [CodexHome] marks as seen.
const (
	CodexModel     = "gpt-5.5"
	codexMigration = "gpt-6-sol"
)

// foreignEnv are the prefixes of the environment variables of the
// machine's own agents and vendors, which [Env] leaves out.
var foreignEnv = []string{"ANTHROPIC_", "CLAUDE", "CODEX_", "OPENAI_", "MCP_", "DISABLE_"}

// Env returns the current environment without the variables that steer
// Claude Code or Codex (ANTHROPIC_*, CLAUDE*, CODEX_*, OPENAI_*, ...),
// followed by extra, entries of the form KEY=VALUE. A child given it
// reaches no vendor, whatever the machine's own agents have set.
func Env(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		foreign := false
		for _, p := range foreignEnv {
			if strings.HasPrefix(kv, p) {
				foreign = true
				break
			}
		}
		if !foreign {
			out = append(out, kv)
		}
	}
	return append(out, extra...)
}

// ClaudeHome writes home/.claude.json as a person who has used Claude
// Code before has it: onboarding done, a theme chosen, the API key
// approved. It grants no folder trust. It returns the environment that
// points Claude Code at baseURL with apiKey and home, to pass to [Env];
// tb's cleanup kills the processes left with home in their environment.
func ClaudeHome(tb testing.TB, home, baseURL, apiKey string) []string {
	tb.Helper()
	approved := apiKey
	if len(approved) > 20 {
		approved = approved[len(approved)-20:]
	}
	cfg := map[string]any{
		"hasCompletedOnboarding": true,
		"lastOnboardingVersion":  version(ClaudeCodePackage),
		"lastReleaseNotesSeen":   version(ClaudeCodePackage),
		"theme":                  "dark",
		"numStartups":            1,
		"autoUpdates":            false,
		// The notice of auto mode, and the logo's animation, are shown
		// once; a returning user has seen them.
		"hasSeenAutoDefaultNotice": true,
		"lastClawdEntranceVersion": version(ClaudeCodePackage),
		"customApiKeyResponses":    map[string]any{"approved": []string{approved}, "rejected": []string{}},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.MkdirAll(home, 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".claude.json"), b, 0o600); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { reap(tb, home) })
	return []string{
		"HOME=" + home,
		"ANTHROPIC_BASE_URL=" + baseURL,
		"ANTHROPIC_API_KEY=" + apiKey,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1",
	}
}

// CodexHome writes home/.codex/config.toml with the model provider
// [CodexProvider] at baseURL (the model server's URL, without /v1),
// and with the notices of a first run already seen. It grants no folder
// trust. It returns the environment that points Codex at it (HOME,
// CODEX_HOME and [CodexKeyEnv]), to pass to [Env]; tb's cleanup kills the
// processes left with home in their environment, Codex's app-server
// daemons among them. extra is appended to config.toml as it is (MCP
// servers, for example).
func CodexHome(tb testing.TB, home, baseURL, extra string) []string {
	tb.Helper()
	codexHome := filepath.Join(home, ".codex")
	if err := os.MkdirAll(codexHome, 0o755); err != nil {
		tb.Fatal(err)
	}
	cfg := fmt.Sprintf(`model = %q
model_provider = %q
check_for_update_on_startup = false

[model_providers.%s]
name = "Scripted model server"
base_url = %q
wire_api = "responses"
env_key = %q

[analytics]
enabled = false

[notice]
hide_full_access_warning = true
hide_rate_limit_model_nudge = true

[notice.model_migrations]
%q = %q

[tui]
screen_reader_detection_done = true
`, CodexModel, CodexProvider, CodexProvider, strings.TrimSuffix(baseURL, "/")+"/v1", CodexKeyEnv, CodexModel, codexMigration)
	if extra != "" {
		cfg += "\n" + extra + "\n"
	}
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(cfg), 0o600); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { reap(tb, home) })
	return []string{"HOME=" + home, "CODEX_HOME=" + codexHome, CodexKeyEnv + "=" + CodexKey}
}
