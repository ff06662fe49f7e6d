"""Test-wide configuration."""
