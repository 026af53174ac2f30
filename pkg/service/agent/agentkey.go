package agent

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// NewAgentKey returns a fresh random agent key.
func NewAgentKey() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// LoadAgentKey returns the key kept for workerID in dir, creating it (mode
// 0600) on first use, so the agent restarting on the same machine presents
// the same key and another agent does not.
func LoadAgentKey(dir, workerID string) (string, error) {
	path := filepath.Join(dir, "agent-"+workerID+".key")
	b, err := os.ReadFile(path)
	if err == nil {
		if key := strings.TrimSpace(string(b)); len(key) >= 16 {
			return key, nil
		}
		return "", fmt.Errorf("agent key %s is damaged; remove it to make a new one", path)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("agent key: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("agent key: %w", err)
	}
	key := NewAgentKey()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return LoadAgentKey(dir, workerID) // another start of this agent made it first
	}
	if err != nil {
		return "", fmt.Errorf("agent key: %w", err)
	}
	defer f.Close()
	if _, err := f.WriteString(key + "\n"); err != nil {
		return "", fmt.Errorf("agent key: %w", err)
	}
	return key, f.Sync()
}
