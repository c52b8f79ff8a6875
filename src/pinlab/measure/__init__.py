"""Linux interfaces that say what really happened: /proc and /sys readers (no third-party imports)."""
