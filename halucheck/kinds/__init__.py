"""Claim kinds: what each kind of claim is, how it is found, what evidence it gets, which checker decides it."""
