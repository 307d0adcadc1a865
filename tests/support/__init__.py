"""Test helpers shared by the suites (scripted servers, fixtures)."""
