"""The built-in scenario files (package data; ``recloop list`` shows them)."""
