"""Verifiers: claims with their evidence in, one verdict per claim out."""
