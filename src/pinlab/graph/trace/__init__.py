"""Tracing a program to measure its affinity graph (methods: exact, sampled, pages)."""
