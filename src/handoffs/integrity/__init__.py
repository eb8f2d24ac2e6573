"""Integrity: keys, cryptosuites and signing, the part every other part builds on.

Nothing here knows contracts, receipts or receivers.
"""
