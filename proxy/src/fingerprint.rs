//! SQL fingerprints: literals → `?`, lists collapsed, comments folded; stable 64-bit ids.
