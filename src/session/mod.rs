//! Sessions: the pieces composed for an engine's frame loop (S5, S7).
