//! Deterministic network simulator for tests, benches and `rungs-sim`.
