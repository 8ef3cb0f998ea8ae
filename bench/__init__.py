"""Benchmarks: ``make bench`` runs every module of this package in order and prints their tables."""
