"""Local stand-ins for external services, used by `pitcrew demo` and the test suite."""
